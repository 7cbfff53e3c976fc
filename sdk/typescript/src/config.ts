/**
 * Configuration from the environment, under the names the Go SDK, `bothy
 * agent run` and the conformance kit use.
 * @module
 */

/** Where an agent runs and what model it asks, as the environment says. */
export interface EnvConfig {
  /** `BOTHY_SERVER`: the server's address. */
  server: string;
  /** `BOTHY_AGENT_TOKEN`: the agent's token. */
  token: string;
  /** `BOTHY_MODEL_BASE_URL`: the model's API root ({base}/chat/completions); `""` when unset. */
  modelBaseURL: string;
  /** `BOTHY_MODEL_API_KEY`: the model's key; `""` when unset. */
  modelApiKey: string;
  /** `BOTHY_MODEL_NAME`: the model to ask for; `""` when unset. */
  modelName: string;
  /** `BOTHY_TOOLS`: the path of the HTTP tools file; `""` when unset. */
  tools: string;
}

/**
 * Reads the configuration from env (default process.env). BOTHY_SERVER
 * defaults to http://127.0.0.1:8080, the address of a local `bothy dev`.
 * @throws Error when BOTHY_AGENT_TOKEN is unset or empty: nothing can run without it.
 */
export function configFromEnv(env: Record<string, string | undefined> = process.env): EnvConfig {
  const get = (k: string) => (env[k] ?? "").trim();
  const token = get("BOTHY_AGENT_TOKEN");
  if (!token) throw new Error("bothy: BOTHY_AGENT_TOKEN is not set: the agent's token is needed");
  return {
    server: get("BOTHY_SERVER") || "http://127.0.0.1:8080",
    token,
    modelBaseURL: get("BOTHY_MODEL_BASE_URL"),
    modelApiKey: get("BOTHY_MODEL_API_KEY"),
    modelName: get("BOTHY_MODEL_NAME"),
    tools: get("BOTHY_TOOLS"),
  };
}

/**
 * An AbortSignal that ends on SIGINT or SIGTERM, for {@link Config.signal}:
 * the adapter then finishes its runs in flight as failed (adapter_stopped)
 * instead of leaving them to the stall timer.
 */
export function shutdownSignal(): AbortSignal {
  const ac = new AbortController();
  const stop = () => ac.abort();
  process.once("SIGINT", stop);
  process.once("SIGTERM", stop);
  return ac.signal;
}
