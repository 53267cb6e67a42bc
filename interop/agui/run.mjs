// Drives aapd's AG-UI door with the official @ag-ui/client HttpAgent, as an
// AG-UI application would: a text run, a frontend tool round trip, a server
// tool, an error, an abort, and a second run on the same thread. Each
// scenario checks what the client built from the events, and what aapd
// stored (over AAP v3, GET /sessions/:id/history).
//
//   AAPD_URL=http://127.0.0.1:8080 AAPD_KEY=aapd_... node run.mjs
//
// It needs the echo agent (aapd's default). It prints one line per scenario
// and exits non-zero, saying what failed, on the first failure.
import { HttpAgent } from "@ag-ui/client";
import { randomUUID } from "node:crypto";

const base = (process.env.AAPD_URL ?? "").replace(/\/$/, "");
const key = process.env.AAPD_KEY ?? "";
if (!base || !key) {
  console.error("set AAPD_URL (the server's base URL) and AAPD_KEY (an API key with sessions:read and sessions:write)");
  process.exit(2);
}
const auth = { Authorization: `Bearer ${key}` };

class Failure extends Error {}
function check(cond, what, detail) {
  if (!cond) throw new Failure(`${what}${detail === undefined ? "" : `: ${JSON.stringify(detail)}`}`);
}

function agent(threadId = `thread-${randomUUID()}`, name = "echo") {
  return new HttpAgent({ url: `${base}/ag-ui/agents/${name}`, headers: auth, threadId });
}

function say(a, content) {
  a.addMessage({ id: randomUUID(), role: "user", content });
}

// run runs the agent and records the run's outcome from its subscriber
// callbacks.
async function run(a, params = {}, extra = {}) {
  const seen = { finished: null, errors: [], types: [] };
  const res = await a.runAgent(params, {
    onEvent: ({ event }) => void seen.types.push(event.type),
    onRunFinishedEvent: (p) => void (seen.finished = p),
    onRunErrorEvent: ({ event }) => void seen.errors.push(event),
    ...extra,
  });
  return { ...res, ...seen };
}

async function aap(path) {
  const res = await fetch(`${base}${path}`, { headers: auth });
  check(res.ok, `GET ${path} answered ${res.status}`, await res.clone().text());
  return res.json();
}

// history is the session's full history as AAP v3 shows it.
async function history(sessionId) {
  return (await aap(`/sessions/${sessionId}/history?type=full`)).history.full;
}

function text(m) {
  return typeof m.content === "string" ? m.content : (m.content ?? []).map((b) => b.text ?? "").join("");
}

const last = (list) => list[list.length - 1];

const scenarios = {
  // A text run, then a second run on the same thread: the client sends the
  // whole thread again, and aapd stores only the new user message.
  async "text run, then a second run on the same thread"() {
    const a = agent();
    say(a, "hello there");
    const first = await run(a);
    check(first.finished?.outcome === "success", "the first run finishes", first.types);
    check(first.types[0] === "RUN_STARTED", "a run starts with RUN_STARTED", first.types);
    const reply = last(a.messages);
    check(reply.role === "assistant" && reply.content === "Echo: hello there", "the client built the answer", reply);
    const sessionId = first.result?.sessionId;
    check(/^sess_/.test(sessionId ?? ""), "RUN_FINISHED's result names the session", first.result);

    say(a, "and again");
    const second = await run(a);
    check(second.result?.sessionId === sessionId, "the second run is on the same session", second.result);
    check(last(a.messages).content === "Echo: and again", "the second answer", last(a.messages));
    const h = await history(sessionId);
    check(
      JSON.stringify(h.map((m) => [m.role, text(m)])) ===
        JSON.stringify([
          ["user", "hello there"],
          ["assistant", "Echo: hello there"],
          ["user", "and again"],
          ["assistant", "Echo: and again"],
        ]),
      "the session holds each message once",
      h,
    );
  },

  // A frontend tool: the agent calls it, the run finishes with the call
  // pending, the application answers with a tool message, the next run
  // continues from the result.
  async "frontend tool round trip"() {
    const tools = [
      {
        name: "get_weather",
        description: "Current weather of a city",
        parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
      },
    ];
    const a = agent();
    say(a, '/tool get_weather {"city":"Paris"}');
    const first = await run(a, { tools });
    check(first.finished?.outcome === "success", "the run finishes", first.types);
    const call = last(a.messages).toolCalls?.[0];
    check(call?.function.name === "get_weather", "the assistant message holds the call", last(a.messages));
    check(JSON.parse(call.function.arguments).city === "Paris", "the call's arguments", call);
    check(
      JSON.stringify(first.finished.pendingToolCallIds) === JSON.stringify([call.id]),
      "the call is left to the application",
      first.finished.pendingToolCallIds,
    );

    a.addMessage({ id: randomUUID(), role: "tool", toolCallId: call.id, content: "Sunny, 21°C" });
    const second = await run(a, { tools });
    check(second.finished?.outcome === "success", "the second run finishes", second.types);
    check(
      last(a.messages).content === "Tool results: get_weather: Sunny, 21°C",
      "the agent answered from the result",
      last(a.messages),
    );
    const h = await history(second.result.sessionId);
    check(h.filter((m) => m.role === "tool").length === 1, "the tool result is stored once", h);
  },

  // A server tool enabled through forwardedProps: aapd runs it and the
  // client sees its call and its result.
  async "server tool"() {
    const a = agent();
    say(a, '/tool calculator {"expression":"6*7"}');
    const res = await run(a, { forwardedProps: { agent: { tools: [{ name: "calculator", trust: true }] } } });
    check(res.finished?.outcome === "success", "the run finishes", res.types);
    check(
      res.finished.pendingToolCallIds.length === 0,
      "nothing is left to the application",
      res.finished.pendingToolCallIds,
    );
    const result = a.messages.find((m) => m.role === "tool");
    check(result && String(result.content).includes("42"), "the tool's result reached the client", a.messages);
    const answer = last(a.messages);
    check(answer.role === "assistant" && answer.content.includes("42"), "the agent answered after the tool", answer);
    check(
      ["TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END", "TOOL_CALL_RESULT"].every((t) => res.types.includes(t)),
      "the call's events",
      res.types,
    );
  },

  // An agent that fails ends the run with RUN_ERROR; a run refused before
  // it starts is an HTTP error the client throws.
  async "an error"() {
    const a = agent();
    say(a, "/error the model fell over");
    const res = await run(a);
    check(res.errors.length === 1, "one RUN_ERROR", res.types);
    check(res.errors[0].code === "turn_failed", "its code", res.errors[0]);
    check(res.errors[0].message.includes("the model fell over"), "its message says why", res.errors[0]);
    check(last(res.types) === "RUN_ERROR", "RUN_ERROR is the last event", res.types);

    // The thread goes on after a failed run.
    say(a, "still there?");
    const after = await run(a);
    check(last(a.messages).content === "Echo: still there?", "the next run answers", last(a.messages));
    check(after.finished?.outcome === "success", "and finishes", after.types);

    const unknown = agent(undefined, "no-such-agent");
    say(unknown, "hello");
    let thrown;
    try {
      await unknown.runAgent();
    } catch (e) {
      thrown = e;
    }
    check(thrown?.status === 400, "an unknown agent is refused with 400", thrown?.message);
  },

  // The client aborts a run mid-answer: the run ends, aapd cancels the
  // turn and keeps what it produced, and the thread's next run works.
  async "an abort"() {
    const a = agent();
    say(a, "/slow 50\n/words 400");
    let aborted = false;
    const res = await run(a, {}, {
      onTextMessageContentEvent: () => {
        if (!aborted) {
          aborted = true;
          a.abortRun();
        }
      },
    });
    check(aborted, "the answer started streaming", res.types);
    check(!res.types.includes("RUN_FINISHED"), "the aborted run did not run to its end", res.types);

    say(a, "after the abort");
    const next = await run(a);
    check(next.finished?.outcome === "success", "the next run finishes", next.types);
    check(last(a.messages).content === "Echo: after the abort", "and answers", last(a.messages));

    const sessionId = next.result.sessionId;
    const turns = (await aap(`/sessions/${sessionId}/turns`)).turns;
    check(turns.length === 2, "two turns", turns);
    check(turns[1].status === "cancelled", "the aborted turn was cancelled", turns[1]);
    const h = await history(sessionId);
    const users = h.filter((m) => m.role === "user").map(text);
    check(
      JSON.stringify(users) === JSON.stringify(["/slow 50\n/words 400", "after the abort"]),
      "each user message is stored once",
      users,
    );
  },
};

let failed = false;
for (const [name, fn] of Object.entries(scenarios)) {
  try {
    await fn();
    console.log(`ok   ${name}`);
  } catch (e) {
    failed = true;
    console.log(`FAIL ${name}: ${e instanceof Failure ? e.message : (e?.stack ?? e)}`);
    break;
  }
}
process.exit(failed ? 1 : 0);
