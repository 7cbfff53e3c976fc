// model is a Bothy agent that answers with a language model, in about forty
// lines: any OpenAI-compatible server (OpenAI, Azure OpenAI, Ollama, vLLM,
// ...) through the official openai package. The SDK renders each run's
// context so that only the request of the person who asked reads as
// instructions. The answer streams into the run's live box while the model
// writes, and the model may call the HTTP tools of the tools file named by
// BOTHY_TOOLS (docs/adapter.md#http-tools), the consequential ones behind
// the SDK's approval gate. The model reads the text of attached files as
// data (Task.promptWithFiles) and may attach a file to its answer
// (attachFileTool; the agent needs the capability files_out).
//
//	BOTHY_SERVER=https://chat.example.com BOTHY_AGENT_TOKEN=bothy_a_... BOTHY_TOOLS=tools.yaml \
//	BOTHY_MODEL_BASE_URL=http://localhost:11434/v1 BOTHY_MODEL_NAME=llama3.2 node examples/model.mjs
import { OpenAIModel, attachFileTool, configFromEnv, loadTools, run, shutdownSignal } from "@bothy/agent";

const env = configFromEnv();
const once = process.argv.includes("--once");

try {
  const tools = [...(env.tools ? await loadTools(env.tools) : []), attachFileTool()];
  // stream: the answer reaches the live box (live: true) piece by piece.
  const m = new OpenAIModel({
    baseURL: env.modelBaseURL || "https://api.openai.com/v1",
    model: env.modelName || "gpt-4o-mini",
    apiKey: env.modelApiKey,
    stream: true,
    tools,
  });
  await run({ server: env.server, token: env.token, once, live: true, signal: shutdownSignal() }, async (t) => {
    // File texts are data, and reading them lowers the in-play trust.
    t.answer(await m.answer(await t.promptWithFiles(), t.signal));
  });
} catch (err) {
  console.error(err.message);
  process.exit(1);
}
