// The model backends against small fakes of the providers' APIs: the
// prompt's two parts reach the model, streamed pieces reach the live box
// (through the run's Task), tool calls go through the gate, a body that is
// no answer fails, an error status names itself.
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { after, describe, it } from "node:test";
import { AnthropicModel, BadModelAnswerError, InPlay, ModelHTTPError, OpenAIModel, Task, render, withTask } from "@bothy/agent";

const servers = [];
after(() => servers.forEach((s) => s.close()));

// fake answers each request with the next of replies: [status, headers, body].
async function fake(replies) {
  const seen = [];
  const srv = createServer((req, res) => {
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", () => {
      seen.push({ path: req.url, auth: req.headers.authorization, key: req.headers["x-api-key"], body: JSON.parse(body || "{}") });
      const [status, headers, out] = replies.shift() ?? [500, {}, "{}"];
      res.writeHead(status, { "Content-Type": "application/json", ...headers });
      res.end(typeof out === "string" ? out : JSON.stringify(out));
    });
  });
  await new Promise((r) => srv.listen(0, "127.0.0.1", r));
  servers.push(srv);
  return { base: `http://127.0.0.1:${srv.address().port}`, seen };
}

const alex = { id: "p1", kind: "USER", handle: "alex", displayName: "Alex" };
const prompt = render({
  runId: "r1",
  contextFloorSeq: 0,
  triggerMessage: { messageId: "m1", threadSeq: 1, createdAt: "", channelId: "c", author: alex, role: "MEMBER", origin: "HUMAN", kind: "USER", contentMd: "@lotse is the printer fixed?", truncated: false, attachments: [], replyToMessageId: null, trust: "TRIGGER", provenance: null, alreadyDelivered: false },
  threadContext: [],
  channelContext: null,
  truncatedBeforeSeq: null,
  followUps: [],
  trustSummary: { lowest: "TRIGGER", counts: [] },
});

const completion = (message, finish = "stop") => ({ id: "c1", object: "chat.completion", created: 1, model: "m", choices: [{ index: 0, message: { role: "assistant", ...message }, finish_reason: finish }] });

describe("OpenAIModel", () => {
  it("sends the rules as system and the blocks as user, with the key", async () => {
    const f = await fake([[200, {}, completion({ content: "Printer 2 works again." }, "length")]]);
    const m = new OpenAIModel({ baseURL: f.base + "/v1", model: "test-model", apiKey: "sk-example" });
    const text = await m.answer(prompt);
    assert.match(text, /^Printer 2 works again\.\n\n_\(This answer was cut off/);
    assert.equal(f.seen[0].path, "/v1/chat/completions");
    assert.equal(f.seen[0].auth, "Bearer sk-example");
    assert.deepEqual(f.seen[0].body.messages.map((x) => x.role), ["system", "user"]);
    assert.match(f.seen[0].body.messages[1].content, /<<<REQUEST [0-9a-f]{32} part=trigger/);
  });
  it("repeats a 429 after its Retry-After and names a status that stays", async () => {
    const f = await fake([
      [429, { "Retry-After": "0" }, { error: { message: "slow down" } }],
      [200, {}, completion({ content: "ok" })],
    ]);
    assert.equal(await new OpenAIModel({ baseURL: f.base, model: "m" }).answer(prompt), "ok");
    assert.equal(f.seen.length, 2);
    const g = await fake([[400, {}, { error: { message: "bad" } }]]);
    await assert.rejects(new OpenAIModel({ baseURL: g.base, model: "m" }).answer(prompt), (e) => e instanceof ModelHTTPError && e.status === 400);
  });
  it("fails on an answer that is no completion", async () => {
    const f = await fake([[200, {}, { hello: "world" }]]);
    await assert.rejects(new OpenAIModel({ baseURL: f.base, model: "m" }).answer(prompt), BadModelAnswerError);
  });
  it("runs a read-only tool, lowers the in-play trust by its output and answers after it", async () => {
    const f = await fake([
      [200, {}, completion({ content: null, tool_calls: [{ id: "t1", type: "function", function: { name: "fetch_page", arguments: '{"url":"https://wiki.example.com"}' } }] }, "tool_calls")],
      [200, {}, completion({ content: "The page says hello." })],
    ]);
    let args = "";
    const tool = { name: "fetch_page", call: async (a) => ((args = a), "hello") };
    const task = new Task({ prompt, play: new InPlay("TRIGGER"), signal: new AbortController().signal });
    const text = await withTask(task, () => new OpenAIModel({ baseURL: f.base, model: "m", tools: [tool] }).answer(prompt));
    assert.equal(text, "The page says hello.");
    assert.equal(args, '{"url":"https://wiki.example.com"}');
    assert.equal(task.inPlay(), "UNVERIFIED");
    assert.deepEqual(f.seen[1].body.messages.at(-1), { role: "tool", tool_call_id: "t1", content: "hello" });
  });
});

describe("AnthropicModel", () => {
  it("sends the rules as system and the blocks as the one user message", async () => {
    const f = await fake([[200, {}, { id: "msg1", type: "message", role: "assistant", model: "m", content: [{ type: "text", text: "Printer 2 works again." }], stop_reason: "end_turn", usage: { input_tokens: 1, output_tokens: 1 } }]]);
    const m = new AnthropicModel({ baseURL: f.base, model: "test-model", apiKey: "sk-ant-example" });
    assert.equal(await m.answer(prompt), "Printer 2 works again.");
    assert.equal(f.seen[0].path, "/v1/messages");
    // The library decides the header (x-api-key, or a bearer token in newer versions).
    assert.ok(f.seen[0].key === "sk-ant-example" || f.seen[0].auth === "Bearer sk-ant-example");
    assert.equal(f.seen[0].body.system, prompt.system);
    assert.equal(f.seen[0].body.max_tokens, 1024);
    assert.deepEqual(f.seen[0].body.messages, [{ role: "user", content: prompt.user }]);
  });
  it("puts a consequential call to nobody outside a run and tells the model", async () => {
    const f = await fake([
      [200, {}, { id: "msg1", type: "message", role: "assistant", model: "m", content: [{ type: "tool_use", id: "u1", name: "send_email", input: { to: "sam@example.com" } }], stop_reason: "tool_use", usage: { input_tokens: 1, output_tokens: 1 } }],
      [200, {}, { id: "msg2", type: "message", role: "assistant", model: "m", content: [{ type: "text", text: "I could not send it." }], stop_reason: "end_turn", usage: { input_tokens: 1, output_tokens: 1 } }],
    ]);
    let sent = 0;
    const tool = { name: "send_email", consequential: true, call: async () => String(++sent) };
    // In play UNVERIFIED: the gate must ask, and outside a run nobody can answer.
    const task = new Task({ prompt, play: new InPlay("UNVERIFIED"), signal: new AbortController().signal });
    const text = await withTask(task, () => new AnthropicModel({ baseURL: f.base, model: "m", apiKey: "k", tools: [tool] }).answer(prompt));
    assert.equal(text, "I could not send it.");
    assert.equal(sent, 0);
    assert.deepEqual(f.seen[1].body.messages.at(-1).content, [{ type: "tool_result", tool_use_id: "u1", content: "The tool send_email failed." }]);
  });
});
