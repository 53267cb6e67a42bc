// Drives aapd's sandbox-agent door with the official sandbox-agent 0.1.7
// TypeScript SDK (SandboxAgent), as an application would, through every
// method: agents, sessions, messages (postMessage with streamEvents, and
// streamTurn), events paged by offset and limit, permission and question
// replies, terminate; tenants and end users that see nothing of another's;
// and a replica killed mid-turn while a client follows the events on
// another.
//
//   SANDBOX_AGENT_SDK=<the SDK's directory> AAPD_URL=http://127.0.0.1:8080 AAPD_KEY=aapd_... node sdk.mjs
//
// Optional: AAPD_KEY2 (another tenant's key), AAPD_USER1 and AAPD_USER2
// (end users' tokens of AAPD_KEY's tenant), REPLICA_A_URL, REPLICA_B_URL,
// REPLICA_A_PID and REPLICA_KEY (two aapd processes on one database, the
// first of which this script SIGKILLs); a scenario whose variables are
// missing is skipped, and says so. It needs the echo agent (aapd's
// default). It prints one line per scenario and exits non-zero, saying
// what failed, on the first failure.
import { pathToFileURL } from "node:url";
import { randomUUID } from "node:crypto";

const sdkDir = process.env.SANDBOX_AGENT_SDK ?? "";
const base = (process.env.AAPD_URL ?? "").replace(/\/$/, "");
const key = process.env.AAPD_KEY ?? "";
if (!sdkDir || !base || !key) {
  console.error("set SANDBOX_AGENT_SDK (the SDK's directory), AAPD_URL (the server's base URL) and AAPD_KEY (an API key)");
  process.exit(2);
}
const { SandboxAgent, SandboxAgentError } = await import(pathToFileURL(`${sdkDir}/dist/index.js`).href);

class Failure extends Error {}
function check(cond, what, detail) {
  if (!cond) throw new Failure(`${what}${detail === undefined ? "" : `: ${JSON.stringify(detail)?.slice(0, 2000)}`}`);
}

const connect = (token, server = base) => SandboxAgent.connect({ baseUrl: `${server}/sandbox-agent`, token });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const newId = () => `sdk-${randomUUID().slice(0, 8)}`;

// refused checks that a call fails with the status and the seed's error type.
async function refused(promise, status, type, what) {
  try {
    await promise;
  } catch (e) {
    check(e instanceof SandboxAgentError, `${what}: a SandboxAgentError`, String(e));
    check(e.status === status, `${what}: status ${status}`, { status: e.status, problem: e.problem });
    check(e.problem?.type === `urn:sandbox-agent:error:${type}`, `${what}: error type ${type}`, e.problem);
    return e.problem;
  }
  throw new Failure(`${what}: succeeded, want ${status} ${type}`);
}

// terminal is what the SDK's reference server ends a turn's stream on.
function terminal(e) {
  if (["session.ended", "error", "agent.unparsed", "permission.requested", "question.requested"].includes(e.type)) return true;
  return e.type === "item.completed" && e.data.item.kind === "status" &&
    ["turn.completed", "session.idle"].includes(e.data.item.content[0]?.label);
}

// turn runs a message with streamTurn and returns its events: the stream
// ends by itself, on a terminal event.
async function turn(c, id, message) {
  const events = [];
  for await (const e of c.streamTurn(id, { message })) events.push(e);
  check(events.length > 0 && terminal(events.at(-1)), `the stream of ${JSON.stringify(message)} ends on a terminal event`, events.map((e) => e.type));
  return events;
}

// after waits until the log holds a turn's end after offset, and returns
// the events after offset.
async function after(c, id, offset) {
  for (let i = 0; i < 200; i++) {
    const { events } = await c.getEvents(id, { offset });
    if (events.length > 0 && terminal(events.at(-1))) return events;
    await sleep(50);
  }
  throw new Failure(`no turn's end after ${offset}`);
}

// assistant is the text of the last assistant message among events.
function assistant(events) {
  const done = events.filter((e) => e.type === "item.completed" && e.data.item.role === "assistant" && e.data.item.kind === "message");
  return done.at(-1)?.data.item.content.filter((p) => p.type === "text").map((p) => p.text).join("");
}

function gapless(events) {
  return events.every((e, i) => e.sequence === i + 1 && e.event_id === `evt_${i + 1}`);
}

const c = await connect(key);

const scenarios = {
  async "agents: configured, installed, their modes and models"() {
    check((await c.getHealth()).status === "ok", "health");
    const { agents } = await c.listAgents();
    const echo = agents.find((a) => a.id === "echo");
    check(echo?.installed && echo.capabilities.permissions && echo.capabilities.questions, "the echo agent", agents);
    await c.installAgent("echo", { reinstall: true });
    await refused(c.installAgent("claude"), 404, "agent_not_installed", "installing an agent aapd does not run");
    check((await c.getAgentModes("echo")).modes[0]?.id === "default", "modes");
    const models = await c.getAgentModels("echo");
    check(models.defaultModel === "echo" && models.models.length === 1, "models", models);
    await refused(c.getAgentModes("codex"), 400, "unsupported_agent", "modes of an unknown agent");
  },

  async "create, and a duplicate create"() {
    const id = newId();
    const created = await c.createSession(id, { agent: "echo", agentMode: "default", permissionMode: "default", variant: "fast" });
    check(created.healthy && created.nativeSessionId?.startsWith("sess_"), "created", created);
    await refused(c.createSession(id, { agent: "echo" }), 409, "session_already_exists", "the same id again");
    await refused(c.createSession(newId(), { agent: "claude" }), 400, "unsupported_agent", "an unknown agent");
    const listed = (await c.listSessions()).sessions.find((s) => s.sessionId === id);
    check(listed?.nativeSessionId === created.nativeSessionId && listed.variant === "fast" && listed.eventCount === 1 && !listed.ended,
      "listed", listed);
  },

  async "a message, its events followed with streamEvents"() {
    const id = newId();
    await c.createSession(id, { agent: "echo" });
    const controller = new AbortController();
    const seen = [];
    const following = (async () => {
      try {
        for await (const e of c.streamEvents(id, { offset: 0 }, controller.signal)) {
          seen.push(e);
          if (terminal(e)) controller.abort();
        }
      } catch (e) {
        if (!controller.signal.aborted) throw e;
      }
    })();
    await c.postMessage(id, { message: "hello" });
    await Promise.race([following, sleep(10000).then(() => controller.abort())]);
    check(seen[0]?.type === "session.started" && gapless(seen), "followed from the session's start, with no gap", seen.map((e) => e.sequence));
    check(assistant(seen) === "Echo: hello", "the answer", seen);
    const user = seen.find((e) => e.type === "item.completed" && e.data.item.role === "user");
    check(user?.data.item.content[0].text === "hello", "the user's message as an item", user);
  },

  async "streamTurn: a turn's events, to its end"() {
    const id = newId();
    await c.createSession(id, { agent: "echo" });
    const events = await turn(c, id, "/think first things first\nagain");
    const item = events.filter((e) => e.type === "item.completed" && e.data.item.role === "assistant").at(-1).data.item;
    check(item.content[0].type === "reasoning" && item.content[0].text === "first things first", "thinking as a reasoning part", item);
    check(assistant(events) === "Echo: again", "the answer", events);
    check(events.some((e) => e.type === "item.delta"), "deltas", events.map((e) => e.type));
    await refused(c.postMessage("no-such-session", { message: "x" }), 404, "session_not_found", "a message to no session");
  },

  async "events paged by offset and limit"() {
    const id = newId();
    await c.createSession(id, { agent: "echo" });
    await turn(c, id, "one two three");
    await turn(c, id, "/words 5");
    const all = await c.getEvents(id, { offset: 0, limit: 1000 });
    check(!all.hasMore && gapless(all.events), "the whole log, numbered from 1", all.events.map((e) => e.sequence));
    const paged = [];
    for (let offset = 0; ;) {
      const page = await c.getEvents(id, { offset, limit: 3 });
      paged.push(...page.events);
      check(page.events.length === 3 || !page.hasMore, "a full page when there is more", page);
      if (!page.hasMore) break;
      offset = page.events.at(-1).sequence;
    }
    check(JSON.stringify(paged) === JSON.stringify(all.events), "pages of 3 are the whole log");
    const raw = await c.getEvents(id, { offset: 5, limit: 1, includeRaw: true });
    check(raw.events[0].raw?.event === "text_delta", "includeRaw: the AAP event it comes from", raw.events[0]);
  },

  async "permission: once, always, reject"() {
    const id = newId();
    await c.createSession(id, { agent: "echo" });
    const ask = async (reply) => {
      const events = await turn(c, id, "/tool clock");
      const request = events.at(-1);
      check(request.type === "permission.requested" && request.data.action === "clock", `the clock asks (${reply})`, request);
      await c.replyPermission(id, request.data.permission_id, { reply });
      return after(c, id, request.sequence);
    };
    let events = await ask("once");
    check(events[0].type === "permission.resolved" && events[0].data.status === "accept", "once: accepted", events[0]);
    check(assistant(events).startsWith("Tool results: clock: "), "the clock ran", assistant(events));
    events = await ask("reject");
    check(events[0].data.status === "reject", "reject: rejected", events[0]);
    check(assistant(events) === "Tool results: clock: Tool call denied", "the agent was told", assistant(events));
    events = await ask("always");
    check(events[0].data.status === "accept_for_session", "always: accepted for the session", events[0]);
    events = await turn(c, id, "/tool clock");
    check(!events.some((e) => e.type === "permission.requested"), "after always, the clock runs unasked", events.map((e) => e.type));
    await refused(c.replyPermission(id, "call_nope", { reply: "once" }), 404, "session_not_found", "a reply to no permission");
  },

  async "question: reply and reject"() {
    const id = newId();
    await c.createSession(id, { agent: "echo" });
    for (const [how, want] of [["reply", "Tool results: ask_user: blue"], ["reject", "Tool results: ask_user: Error: the user declined to answer the question"]]) {
      const events = await turn(c, id, "/ask Which color? | red | blue");
      const q = events.at(-1);
      check(q.type === "question.requested" && q.data.prompt === "Which color?" && q.data.options.join() === "red,blue", "the question", q);
      if (how === "reply") await c.replyQuestion(id, q.data.question_id, { answers: [["blue"]] });
      else await c.rejectQuestion(id, q.data.question_id);
      const next = await after(c, id, q.sequence);
      const resolved = next[0];
      check(resolved.type === "question.resolved" && resolved.data.status === (how === "reply" ? "answered" : "rejected"), `${how}: resolved`, resolved);
      check(assistant(next) === want, `${how}: the agent read it`, assistant(next));
    }
    await refused(c.rejectQuestion(id, "call_nope"), 404, "session_not_found", "a rejection of no question");
  },

  async "terminate"() {
    const id = newId();
    await c.createSession(id, { agent: "echo" });
    await c.postMessage(id, { message: "/slow 100\n/words 100" });
    await c.terminateSession(id);
    let events = [];
    for (let i = 0; i < 200 && events.at(-1)?.type !== "session.ended"; i++) {
      events = (await c.getEvents(id, { offset: 0 })).events;
      await sleep(50);
    }
    check(events.at(-1)?.type === "session.ended" && events.at(-1).data.reason === "terminated", "the log ends with session.ended", events.at(-1));
    await refused(c.postMessage(id, { message: "again" }), 409, "invalid_request", "a message after the end");
    await c.terminateSession(id);
    const listed = (await c.listSessions()).sessions.find((s) => s.sessionId === id);
    check(listed?.ended && listed.eventCount === events.length, "listed as ended", listed);
  },

  async "another tenant and another end user see nothing"() {
    const { AAPD_KEY2: key2, AAPD_USER1: user1, AAPD_USER2: user2 } = process.env;
    if (!key2 || !user1 || !user2) return "set AAPD_KEY2, AAPD_USER1 and AAPD_USER2";
    const mine = newId();
    const created = await c.createSession(mine, { agent: "echo" });
    await turn(c, mine, "a secret");
    const other = await connect(key2);
    check(!(await other.listSessions()).sessions.some((s) => s.nativeSessionId === created.nativeSessionId), "another tenant lists it");
    for (const name of [mine, created.nativeSessionId]) {
      await refused(other.getEvents(name), 404, "session_not_found", `another tenant reads ${name}`);
      await refused(other.postMessage(name, { message: "x" }), 404, "session_not_found", `another tenant writes ${name}`);
    }
    const [u1, u2] = [await connect(user1), await connect(user2)];
    const theirs = await u1.createSession("user-thread", { agent: "echo" });
    await turn(u1, "user-thread", "user1's secret");
    check((await u2.listSessions()).sessions.length === 0, "user2 lists nothing", await u2.listSessions());
    await refused(u2.getEvents("user-thread"), 404, "session_not_found", "user2 reads user1's name");
    await refused(u2.getEvents(theirs.nativeSessionId), 404, "session_not_found", "user2 reads user1's session id");
    await refused(u2.terminateSession(theirs.nativeSessionId), 404, "session_not_found", "user2 ends user1's session");
    const own = await u2.createSession("user-thread", { agent: "echo" }); // the same name, user2's own
    check(own.nativeSessionId !== theirs.nativeSessionId, "one name, two users' sessions");
    check((await u2.getEvents("user-thread")).events.length === 1, "user2's session holds only its start");
  },

  async "a replica killed mid-turn while a client follows the events on another"() {
    const { REPLICA_A_URL: a, REPLICA_B_URL: b, REPLICA_A_PID: pid, REPLICA_KEY: rkey } = process.env;
    if (!a || !b || !pid || !rkey) return "set REPLICA_A_URL, REPLICA_B_URL, REPLICA_A_PID and REPLICA_KEY";
    const [ca, cb] = [await connect(rkey, a), await connect(rkey, b)];
    const id = newId();
    await cb.createSession(id, { agent: "echo" });
    await turn(cb, id, "before");
    const controller = new AbortController();
    const seen = [];
    let killed = false;
    const following = (async () => {
      try {
        for await (const e of cb.streamEvents(id, { offset: 0 }, controller.signal)) {
          seen.push(e);
          if (!killed && e.type === "item.delta" && e.data.delta.startsWith("word3")) {
            killed = true;
            process.kill(Number(pid), "SIGKILL");
          }
          if (assistant(seen.slice(-10)) === "Echo: after the crash" && terminal(e)) controller.abort();
        }
      } catch (e) {
        if (!controller.signal.aborted) throw e;
      }
    })();
    await ca.postMessage(id, { message: "/slow 150\n/words 40" });
    for (let i = 0; i < 400 && !seen.some((e) => e.type === "error"); i++) await sleep(50);
    check(killed, "the replica running the turn was killed mid-turn", seen.map((e) => e.type));
    const error = seen.find((e) => e.type === "error");
    check(error?.data.code === "interrupted", "the follower saw the killed turn end, interrupted", seen.slice(-3));
    await cb.postMessage(id, { message: "after the crash" });
    await Promise.race([following, sleep(15000).then(() => controller.abort())]);
    check(assistant(seen) === "Echo: after the crash", "the follower went on with the next turn", seen.slice(-5));
    check(gapless(seen), "with no gap", seen.map((e) => e.sequence));
    const logged = (await cb.getEvents(id, { offset: 0 })).events;
    check(JSON.stringify(logged) === JSON.stringify(seen), "what it followed is the log, event for event",
      { followed: seen.length, logged: logged.length });
  },
};

let failed = false;
for (const [name, fn] of Object.entries(scenarios)) {
  try {
    const skipped = await fn();
    console.log(skipped ? `skip ${name}: ${skipped}` : `ok   ${name}`);
  } catch (e) {
    failed = true;
    console.log(`FAIL ${name}: ${e instanceof Failure ? e.message : (e?.stack ?? e)}`);
    break;
  }
}
// Not process.exit: it would drop what is still buffered for a piped stdout.
process.exitCode = failed ? 1 : 0;
