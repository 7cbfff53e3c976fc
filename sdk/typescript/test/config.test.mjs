// BOTHY_MODEL, as the Python SDK's model_from_env reads it: openai when
// unset or empty, anthropic on request, anything else refused; the other
// BOTHY_MODEL_ variables configure the backend it names. They run on the
// built package (npm run build first).
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { after, describe, it } from "node:test";
import { AnthropicModel, OpenAIModel, configFromEnv, modelFromEnv, render } from "@bothy/agent";

const servers = [];
after(() => servers.forEach((s) => s.close()));

// fake answers every request with body as JSON and records its path, key
// headers and body.
async function fake(body) {
  const seen = [];
  const srv = createServer((req, res) => {
    let text = "";
    req.on("data", (c) => (text += c));
    req.on("end", () => {
      seen.push({ path: req.url, auth: req.headers.authorization, key: req.headers["x-api-key"], body: JSON.parse(text || "{}") });
      res.writeHead(200, { "Content-Type": "application/json" });
      res.end(JSON.stringify(body));
    });
  });
  await new Promise((r) => srv.listen(0, "127.0.0.1", r));
  servers.push(srv);
  return { base: `http://127.0.0.1:${srv.address().port}`, seen };
}

const sam = { id: "p2", kind: "USER", handle: "sam", displayName: "Sam" };
const prompt = render({
  runId: "r1",
  contextFloorSeq: 0,
  triggerMessage: { messageId: "m1", threadSeq: 1, createdAt: "", channelId: "c", author: sam, role: "MEMBER", origin: "HUMAN", kind: "USER", contentMd: "@lotse is the printer fixed?", truncated: false, attachments: [], replyToMessageId: null, trust: "TRIGGER", provenance: null, alreadyDelivered: false },
  threadContext: [],
  channelContext: null,
  truncatedBeforeSeq: null,
  followUps: [],
  trustSummary: { lowest: "TRIGGER", counts: [] },
});
const completion = { id: "c1", object: "chat.completion", created: 1, model: "m", choices: [{ index: 0, message: { role: "assistant", content: "Yes, Sam." }, finish_reason: "stop" }] };
const message = { id: "msg1", type: "message", role: "assistant", model: "m", content: [{ type: "text", text: "Yes, Robin." }], stop_reason: "end_turn", usage: { input_tokens: 1, output_tokens: 1 } };
const base = { BOTHY_MODEL_BASE_URL: "https://models.example.com/v1", BOTHY_MODEL_NAME: "example-model" };

describe("BOTHY_MODEL", () => {
  it("is openai when unset or empty, and read as it is otherwise", () => {
    assert.equal(configFromEnv({ BOTHY_AGENT_TOKEN: "t" }).model, "openai");
    assert.equal(configFromEnv({ BOTHY_AGENT_TOKEN: "t", BOTHY_MODEL: " " }).model, "openai");
    assert.equal(configFromEnv({ BOTHY_AGENT_TOKEN: "t", BOTHY_MODEL: "anthropic" }).model, "anthropic");
    // An agent that asks no model starts whatever the variable says (the
    // default of bothy agent run is echo); modelFromEnv is what refuses.
    assert.equal(configFromEnv({ BOTHY_AGENT_TOKEN: "t", BOTHY_MODEL: "echo" }).model, "echo");
  });

  it("makes the backend it names, openai by default", () => {
    assert.ok(modelFromEnv({}, base) instanceof OpenAIModel);
    assert.ok(modelFromEnv({}, { ...base, BOTHY_MODEL: "" }) instanceof OpenAIModel);
    assert.ok(modelFromEnv({}, { ...base, BOTHY_MODEL: "openai" }) instanceof OpenAIModel);
    assert.ok(modelFromEnv({ stream: true }, { ...base, BOTHY_MODEL: "anthropic" }) instanceof AnthropicModel);
  });

  it("refuses another backend, as the Python SDK does", () => {
    for (const bad of ["echo", "OpenAI", "gpt"]) {
      assert.throws(() => modelFromEnv({}, { ...base, BOTHY_MODEL: bad }), { message: `bothy: BOTHY_MODEL must be openai or anthropic, not '${bad}'` });
    }
  });

  it("lets the backend refuse what it needs", () => {
    assert.throws(() => modelFromEnv({}, { BOTHY_MODEL_NAME: "example-model" }), /base URL/);
    assert.throws(() => modelFromEnv({}, { BOTHY_MODEL_BASE_URL: "https://models.example.com/v1" }), /model name/);
    assert.throws(() => modelFromEnv({}, { BOTHY_MODEL: "anthropic" }), /model name/);
    // An option takes the place of its variable.
    assert.ok(modelFromEnv({ model: "example-model" }, { BOTHY_MODEL_BASE_URL: "https://models.example.com/v1" }) instanceof OpenAIModel);
  });

  it("asks the OpenAI backend at the base URL, with the key and the model name", async () => {
    const f = await fake(completion);
    const m = modelFromEnv({}, { BOTHY_MODEL_BASE_URL: f.base + "/v1", BOTHY_MODEL_API_KEY: "sk-example", BOTHY_MODEL_NAME: "example-model" });
    assert.equal(await m.answer(prompt), "Yes, Sam.");
    assert.equal(f.seen[0].path, "/v1/chat/completions");
    assert.equal(f.seen[0].auth, "Bearer sk-example");
    assert.equal(f.seen[0].body.model, "example-model");
  });

  it("asks the Anthropic backend at {base}/messages, the form the OpenAI one and the kit use", async () => {
    const f = await fake(message);
    const env = { BOTHY_MODEL: "anthropic", BOTHY_MODEL_BASE_URL: f.base + "/v1/", BOTHY_MODEL_API_KEY: "sk-ant-example", BOTHY_MODEL_NAME: "example-model" };
    const m = modelFromEnv({ maxTokens: 64 }, env);
    assert.equal(await m.answer(prompt), "Yes, Robin.");
    assert.equal(f.seen[0].path, "/v1/messages");
    assert.ok(f.seen[0].key === "sk-ant-example" || f.seen[0].auth === "Bearer sk-ant-example");
    assert.equal(f.seen[0].body.model, "example-model");
    assert.equal(f.seen[0].body.max_tokens, 64);
  });
});
