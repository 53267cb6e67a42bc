// Drives the official sandbox-agent 0.1.7 web inspector, served from
// another origin, against aapd's sandbox-agent door, in headless Chromium
// (playwright-core, pinned by package-lock.json): it opens the inspector
// with ?url=…&token=…, creates a session with the echo agent, sends a
// message and sees the answer and the events, then answers a permission
// and a question, as a person would, and checks what the door's log holds.
//
//   CHROMIUM=/usr/bin/chromium INSPECTOR_URL='http://127.0.0.1:9000/ui/?url=…&token=…' \
//   AAPD_URL=http://127.0.0.1:8080 AAPD_KEY=aapd_... node inspector.mjs
//
// It prints one line per step and exits non-zero, saying what failed, on
// the first failure (with the page's console and failed requests).
import { chromium } from "playwright-core";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";

const { CHROMIUM: executablePath, INSPECTOR_URL: inspectorUrl, AAPD_URL: base, AAPD_KEY: key } = process.env;
if (!executablePath || !inspectorUrl || !base || !key) {
  console.error("set CHROMIUM (the browser), INSPECTOR_URL (the inspector, with ?url=&token=), AAPD_URL and AAPD_KEY");
  process.exit(2);
}

class Failure extends Error {}
function check(cond, what, detail) {
  if (!cond) throw new Failure(`${what}${detail === undefined ? "" : `: ${JSON.stringify(detail)?.slice(0, 2000)}`}`);
}

// Generous: the test suite may load the machine's every core.
const timeout = 60000;
const userDataDir = await mkdtemp(join(tmpdir(), "aapd-inspector-"));
let context;
try {
  context = await chromium.launchPersistentContext(userDataDir, {
    executablePath,
    headless: true,
    timeout,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
} catch (e) {
  console.log(`FAIL launching ${executablePath}: ${e?.stack ?? e}`);
  await rm(userDataDir, { recursive: true, force: true });
  throw e;
}
const page = context.pages()[0] ?? (await context.newPage());
page.setDefaultTimeout(timeout);
const console_ = [];
page.on("console", (m) => console_.push(`${m.type()}: ${m.text()}`));
page.on("requestfailed", (r) => console_.push(`request failed: ${r.method()} ${r.url()} ${r.failure()?.errorText}`));

// events reads the session's log over the door's API.
async function events(sessionId) {
  const res = await fetch(`${base}/sandbox-agent/v1/sessions/${encodeURIComponent(sessionId)}/events?offset=0`, {
    headers: { Authorization: `Bearer ${key}` },
  });
  check(res.ok, `GET events answered ${res.status}`);
  return (await res.json()).events;
}

const input = () => page.getByPlaceholder("Send a message...");
async function send(text) {
  await input().fill(text);
  await input().press("Enter");
}

let sessionId = "";
const steps = {
  async "opens with ?url=…&token=… and connects"() {
    await page.goto(inspectorUrl);
    await page.getByText("No Session Selected").waitFor();
    check(await page.getByText(`${base}/sandbox-agent`).isVisible(), "the header names the door");
  },

  async "creates a session with the echo agent"() {
    await page.getByRole("button", { name: "Create Session" }).click();
    await page.locator(".empty-state-menu .sidebar-add-option", { hasText: "echo" }).click();
    await page.getByText("Ready to Chat").waitFor();
    sessionId = (await page.locator(".session-id-display").textContent())?.trim() ?? "";
    check(sessionId.startsWith("session-"), "the inspector names the session", sessionId);
    await page.locator(".session-item", { hasText: sessionId }).waitFor();
  },

  async "sends a message, and sees the answer and the events"() {
    await send("hello from the inspector");
    await page.locator(".messages-container").getByText("Echo: hello from the inspector").waitFor();
    await page.getByText(/Offset: [1-9]\d*/).waitFor();
    const offset = Number((await page.getByText(/Offset: \d+/).textContent()).match(/\d+/)[0]);
    const log = await events(sessionId);
    check(offset === log.length && log.at(-1).type === "item.completed", "the events tab has the whole log", { offset, log: log.length });
    await page.locator(".debug-panel .event-list").getByText("item.delta").first().waitFor();
  },

  async "answers a permission"() {
    await send("/tool clock");
    await page.getByRole("button", { name: "Allow Once" }).click();
    await page.locator(".messages-container").getByText(/Tool results: clock: /).waitFor();
    const resolved = (await events(sessionId)).filter((e) => e.type === "permission.resolved");
    check(resolved.length === 1 && resolved[0].data.status === "accept", "the permission was granted once", resolved);
  },

  async "answers a question"() {
    await send("/ask Which one? | alpha | beta");
    await page.getByText("Which one?", { exact: true }).waitFor();
    await page.getByLabel("beta").check();
    await page.getByRole("button", { name: "Reply" }).click();
    await page.locator(".messages-container").getByText("Tool results: ask_user: beta").waitFor();
    const resolved = (await events(sessionId)).filter((e) => e.type === "question.resolved");
    check(resolved.length === 1 && resolved[0].data.status === "answered" && resolved[0].data.response === "beta", "the question was answered", resolved);
  },
};

let failed = false;
try {
  for (const [name, fn] of Object.entries(steps)) {
    try {
      await fn();
      console.log(`ok   ${name}`);
    } catch (e) {
      failed = true;
      console.log(`FAIL ${name}: ${e instanceof Failure ? e.message : (e?.stack ?? e)}`);
      console.log(`page console and failed requests:\n${console_.join("\n")}`);
      break;
    }
  }
} finally {
  await context.close();
  await rm(userDataDir, { recursive: true, force: true });
}
// Not process.exit: it would drop what is still buffered for a piped stdout.
process.exitCode = failed ? 1 : 0;
