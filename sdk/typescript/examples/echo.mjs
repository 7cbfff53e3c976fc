// echo is a Bothy agent in forty lines: it answers every run with what the
// person asked and the follow-ups they sent, and says how far the context
// may be trusted. Run it with the agent's token, after npm ci && npm run build:
//
//	BOTHY_SERVER=https://chat.example.com BOTHY_AGENT_TOKEN=bothy_a_... node examples/echo.mjs
import { configFromEnv, run, shutdownSignal } from "@bothy/agent";

const env = configFromEnv();
const once = process.argv.includes("--once");

try {
  await run({ server: env.server, token: env.token, once, signal: shutdownSignal() }, (t) => {
    const c = t.context;
    let reply = `You asked: ${JSON.stringify(c.triggerMessage.contentMd)}`;
    for (const f of t.followUps) {
      reply += `\nThen: ${JSON.stringify(f.contentMd)}`;
    }
    reply += `\n(least trusted element: ${c.trustSummary?.lowest ?? "UNVERIFIED"})`;
    t.answer(reply);
  });
} catch (err) {
  console.error(err.message);
  process.exit(1);
}
