// Drives aapd's OpenAI door with the official openai npm client (7.x) and
// @openai/agents, as an application written against OpenAI's API would,
// with only its base URL changed: conversations and their items, a
// streamed response on a conversation, a function-tool round trip, an
// aapd server tool as an mcp_call, previous_response_id chaining,
// background + retrieve + cancel, errors, another tenant seeing nothing,
// and an Agents SDK agent with a function tool over two runs of one
// conversation.
//
//   AAPD_URL=http://127.0.0.1:8080 AAPD_KEY=aapd_... AAPD_OTHER_KEY=aapd_... node run.mjs
//
// It needs the echo agent (aapd's default). It prints one line per scenario
// and exits non-zero, saying what failed, on the first failure.
import OpenAI from "openai";
import { Agent, run, tool, setDefaultOpenAIClient, setTracingDisabled } from "@openai/agents";

const base = (process.env.AAPD_URL ?? "").replace(/\/$/, "");
const key = process.env.AAPD_KEY ?? "";
const otherKey = process.env.AAPD_OTHER_KEY ?? "";
if (!base || !key || !otherKey) {
  console.error("set AAPD_URL (the server's base URL), AAPD_KEY and AAPD_OTHER_KEY (API keys of two tenants)");
  process.exit(2);
}
const baseURL = `${base}/openai/v1`;
const client = new OpenAI({ baseURL, apiKey: key, maxRetries: 0 });
const other = new OpenAI({ baseURL, apiKey: otherKey, maxRetries: 0 });

class Failure extends Error {}
function check(cond, what, detail) {
  if (!cond) throw new Failure(`${what}${detail === undefined ? "" : `: ${JSON.stringify(detail)}`}`);
}
async function refused(promise, status, what) {
  try {
    await promise;
  } catch (e) {
    check(e instanceof OpenAI.APIError && e.status === status, `${what}: status`, { status: e.status, error: e.error });
    return e;
  }
  throw new Failure(`${what}: not refused`);
}
const texts = (items) => items.map((i) => (i.content ?? []).map((c) => c.text ?? "").join("") || i.type);
const weather = {
  type: "function", name: "get_weather", description: "The weather of a city",
  parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] }, strict: false,
};
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const scenarios = {
  async "conversations and items"() {
    const conv = await client.conversations.create({ items: [{ role: "user", content: "hello" }], metadata: { topic: "t" } });
    check(conv.id.startsWith("sess_") && conv.metadata.topic === "t", "created", conv);
    await client.conversations.items.create(conv.id, { items: [{ type: "message", role: "user", content: "more" }] });
    const page = await client.conversations.items.list(conv.id, { order: "asc" });
    check(JSON.stringify(texts(page.data)) === JSON.stringify(["hello", "more"]), "items", texts(page.data));
    const one = await client.conversations.items.retrieve(page.data[1].id, { conversation_id: conv.id });
    check(one.id === page.data[1].id, "item", one);
    const updated = await client.conversations.update(conv.id, { metadata: { topic: "u" } });
    check(updated.metadata.topic === "u", "updated", updated);
    const e = await refused(client.conversations.items.delete(one.id, { conversation_id: conv.id }), 400, "deleting an item");
    check(e.headers.get("x-should-retry") === "false", "x-should-retry", Object.fromEntries(e.headers));
    const deleted = await client.conversations.delete(conv.id);
    check(deleted.deleted, "deleted", deleted);
    await refused(client.conversations.retrieve(conv.id), 404, "a deleted conversation");
  },

  async "a streamed response on a conversation"() {
    const conv = await client.conversations.create({});
    const stream = client.responses.stream({ model: "echo", conversation: conv.id, input: "/think hmm\nstream me" });
    let deltas = "";
    const seqs = [];
    stream.on("response.output_text.delta", (e) => void (deltas += e.delta));
    stream.on("event", (e) => void seqs.push(e.sequence_number));
    const final = await stream.finalResponse();
    check(deltas === "Echo: stream me" && final.output_text === deltas, "text", { deltas, final: final.output_text });
    check(seqs.every((n, i) => n === i), "sequence numbers", seqs);
    check(final.output.some((o) => o.type === "reasoning"), "reasoning item", final.output);
    const items = await client.conversations.items.list(conv.id);
    check(items.data[0].id === final.output.at(-1).id, "the streamed item is the conversation's", { items: items.data, final: final.output });
  },

  async "a function tool round trip"() {
    const first = await client.responses.create({ model: "echo", tools: [weather], input: '/tool get_weather {"city":"Paris"}' });
    const call = first.output.find((o) => o.type === "function_call");
    check(call && call.name === "get_weather" && JSON.parse(call.arguments).city === "Paris", "function_call", first.output);
    const second = await client.responses.create({
      model: "echo", tools: [weather], previous_response_id: first.id,
      input: [{ type: "function_call_output", call_id: call.call_id, output: "sunny" }],
    });
    check(second.output_text.includes("sunny"), "after the output", second.output_text);
  },

  async "an aapd tool as an mcp_call"() {
    const resp = await client.responses.create({ model: "echo", input: '/tool calculator {"expression":"6*7"}' });
    const mcp = resp.output.find((o) => o.type === "mcp_call");
    check(mcp && mcp.server_label === "aapd" && mcp.output.includes("42"), "mcp_call", resp.output);
    check(!resp.output.some((o) => o.type === "function_call"), "no function_call", resp.output);
  },

  async "previous_response_id chaining"() {
    const one = await client.responses.create({ model: "echo", input: "one" });
    const two = await client.responses.create({ model: "echo", input: "two", previous_response_id: one.id });
    const three = await client.responses.create({ model: "echo", input: "three", previous_response_id: two.id });
    check(three.output_text === "Echo: three" && three.previous_response_id === two.id, "chain", three);
    const fork = await client.responses.create({ model: "echo", input: "other", previous_response_id: one.id });
    check(fork.output_text === "Echo: other" && fork.id.slice(0, 37) !== one.id.slice(0, 37), "fork", fork);
    const input = await client.responses.inputItems.list(three.id);
    check(texts(input.data)[0] === "three", "input items", input.data);
  },

  async "background, retrieve and cancel"() {
    const bg = await client.responses.create({ model: "echo", background: true, input: "/slow 50\nlater" });
    check(bg.status === "queued" || bg.status === "in_progress", "answered at once", bg.status);
    let got = bg;
    for (let i = 0; i < 300 && got.status !== "completed"; i++) {
      await sleep(100);
      got = await client.responses.retrieve(bg.id);
    }
    check(got.output_text === "Echo: later", "completed", got);
    const slow = await client.responses.create({ model: "echo", background: true, input: "/slow 500\n/words 40" });
    const cancelled = await client.responses.cancel(slow.id);
    check(cancelled.status === "cancelled", "cancelled", cancelled.status);
  },

  async "errors and another tenant"() {
    const e = await refused(client.responses.create({ model: "gpt-nope", input: "hi" }), 404, "an unknown model");
    check(e.code === "model_not_found" && e.param === "model", "its error object", e.error);
    const conv = await client.conversations.create({ items: [{ role: "user", content: "mine" }] });
    await refused(other.conversations.retrieve(conv.id), 404, "another tenant's conversation");
    await refused(other.conversations.items.list(conv.id), 404, "another tenant's items");
    const resp = await client.responses.create({ model: "echo", input: "private" });
    await refused(other.responses.retrieve(resp.id), 404, "another tenant's response");
    await refused(new OpenAI({ baseURL, apiKey: "aapd_nope", maxRetries: 0 }).conversations.retrieve(conv.id), 401, "a bad key");
  },

  async "an Agents SDK agent over two runs of a conversation"() {
    setDefaultOpenAIClient(client);
    setTracingDisabled(true);
    const calls = [];
    const getWeather = tool({
      name: "get_weather", description: "The weather of a city", strict: false,
      parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"], additionalProperties: false },
      execute: async ({ city }) => { calls.push(city); return `sunny in ${city}`; },
    });
    const agent = new Agent({ name: "weather", model: "echo", tools: [getWeather] });
    const conv = await client.conversations.create({});
    const first = await run(agent, '/tool get_weather {"city":"Lisbon"}', { conversationId: conv.id });
    check(calls.join() === "Lisbon" && String(first.finalOutput).includes("sunny in Lisbon"), "first run", { calls, out: first.finalOutput });
    const second = await run(agent, "and now?", { conversationId: conv.id });
    check(second.finalOutput === "Echo: and now?", "second run", second.finalOutput);
    const items = await client.conversations.items.list(conv.id, { order: "asc", limit: 100 });
    const types = items.data.map((i) => i.type);
    check(JSON.stringify(types) === JSON.stringify(["message", "function_call", "function_call_output", "message", "message", "message"]), "the conversation", types);
  },
};

let failed = false;
for (const [name, fn] of Object.entries(scenarios)) {
  try {
    await fn();
    console.log(`ok   ${name}`);
  } catch (e) {
    console.log(`FAIL ${name}: ${e instanceof Failure ? e.message : e.stack ?? e}`);
    failed = true;
  }
}
process.exitCode = failed ? 1 : 0;
