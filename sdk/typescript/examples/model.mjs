// model is a Bothy agent that answers with a language model, in about forty
// lines: any OpenAI-compatible server (OpenAI, Azure OpenAI, Ollama, vLLM,
// ...) through the official openai package. The SDK renders each run's
// context so that only the request of the person who asked reads as
// instructions. The answer streams into the run's live box while the model
// writes, and the model may call the HTTP tools of the tools file named by
// BOTHY_TOOLS (docs/adapter.md#http-tools), the consequential ones behind
// the SDK's approval gate.
//
//	BOTHY_SERVER=https://chat.example.com BOTHY_AGENT_TOKEN=bothy_a_... BOTHY_TOOLS=tools.yaml \
//	BOTHY_MODEL_BASE_URL=http://localhost:11434/v1 BOTHY_MODEL_NAME=llama3.2 node examples/model.mjs
import { OpenAIModel, configFromEnv, loadTools, run, shutdownSignal } from "@bothy/agent";

const env = configFromEnv();
const once = process.argv.includes("--once");

try {
  const tools = env.tools ? await loadTools(env.tools) : [];
  // stream: the answer reaches the live box (live: true) piece by piece.
  const m = new OpenAIModel({
    baseURL: env.modelBaseURL || "https://api.openai.com/v1",
    model: env.modelName || "gpt-4o-mini",
    apiKey: env.modelApiKey,
    stream: true,
    tools,
  });
  await run({ server: env.server, token: env.token, once, live: true, signal: shutdownSignal() }, async (t) => {
    t.answer(await m.answer(t.prompt, t.signal));
  });
} catch (err) {
  console.error(err.message);
  process.exit(1);
}
