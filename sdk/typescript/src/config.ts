/**
 * Configuration from the environment, under the names the Go SDK, `bothy
 * agent run` and the conformance kit use.
 * @module
 */
import { AnthropicModel } from "./model/anthropic.js";
import { OpenAIModel } from "./model/openai.js";
import type { Tool } from "./task.js";

/** The model backends `BOTHY_MODEL` may name; the first is the default. */
const MODEL_BACKENDS = ["openai", "anthropic"] as const;

/** Where an agent runs and what model it asks, as the environment says. */
export interface EnvConfig {
  /** `BOTHY_SERVER`: the server's address. */
  server: string;
  /** `BOTHY_AGENT_TOKEN`: the agent's token. */
  token: string;
  /**
   * `BOTHY_MODEL`: the model backend, `openai` or `anthropic` (as `bothy
   * agent run --model` reads it); `"openai"` when unset or empty. Not
   * checked here, so that an agent that asks no model starts whatever the
   * variable says: {@link modelFromEnv} refuses any other value.
   */
  model: string;
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
  const get = getter(env);
  const token = get("BOTHY_AGENT_TOKEN");
  if (!token) throw new Error("bothy: BOTHY_AGENT_TOKEN is not set: the agent's token is needed");
  return {
    server: get("BOTHY_SERVER") || "http://127.0.0.1:8080",
    token,
    model: get("BOTHY_MODEL") || MODEL_BACKENDS[0],
    modelBaseURL: get("BOTHY_MODEL_BASE_URL"),
    modelApiKey: get("BOTHY_MODEL_API_KEY"),
    modelName: get("BOTHY_MODEL_NAME"),
    tools: get("BOTHY_TOOLS"),
  };
}

/** Reads one variable of env, trimmed, `""` when unset. */
function getter(env: Record<string, string | undefined>): (name: string) => string {
  return (name) => (env[name] ?? "").trim();
}

/**
 * What {@link modelFromEnv} sets on the backend besides the environment.
 * baseURL, model and apiKey, when given, take the place of their
 * variables; the rest have the backends' defaults when absent.
 */
export interface ModelOptions {
  /** Instead of `BOTHY_MODEL_BASE_URL`. */
  baseURL?: string;
  /** Instead of `BOTHY_MODEL_NAME`. */
  model?: string;
  /** Instead of `BOTHY_MODEL_API_KEY`. */
  apiKey?: string;
  /** Ask for a streamed answer, so that it grows in the run's live box. */
  stream?: boolean;
  /** The tools the model may call, behind the gate. */
  tools?: Tool[];
  /** Bounds each answer's tokens (OpenAI: the server's default, Anthropic: 1024, when absent). */
  maxTokens?: number;
  /** Bounds the whole answer in ms (default 120 000). */
  timeoutMs?: number;
  /** Requests of one answer on 429, 5xx and network errors (default: the backend's). */
  maxAttempts?: number;
  /** Rounds of tool calls before the model must answer in text (default 8). */
  maxToolRounds?: number;
}

/**
 * The model backend `BOTHY_MODEL` names: {@link OpenAIModel} for `openai`
 * (the default when unset or empty) or {@link AnthropicModel} for
 * `anthropic`, as `bothy agent run --model` reads the variable, on
 * `BOTHY_MODEL_BASE_URL`, `BOTHY_MODEL_API_KEY` (OpenAI sends no key when empty)
 * and `BOTHY_MODEL_NAME` with options set on them. The Python SDK's
 * `model_from_env` does the same.
 *
 * For Anthropic the base URL is the kit's and OpenAI's form, the API root
 * with `/v1` ({base}/messages): the `/v1` is cut off, because the library
 * adds it itself; empty means Anthropic's own server.
 * @throws Error when `BOTHY_MODEL` names another backend, or the backend
 *   refuses its configuration (OpenAI without an absolute base URL, either
 *   without a model name).
 */
export function modelFromEnv(options: ModelOptions = {}, env: Record<string, string | undefined> = process.env): OpenAIModel | AnthropicModel {
  const get = getter(env);
  const which = get("BOTHY_MODEL") || MODEL_BACKENDS[0];
  const { baseURL = get("BOTHY_MODEL_BASE_URL"), model = get("BOTHY_MODEL_NAME"), apiKey = get("BOTHY_MODEL_API_KEY"), maxAttempts, ...rest } = options;
  if (which === "openai") return new OpenAIModel({ ...rest, baseURL, model, apiKey, maxAttempts });
  if (which === "anthropic") {
    // Attempts count the first request; the library counts only repeats.
    const maxRetries = maxAttempts === undefined ? undefined : Math.max(0, maxAttempts - 1);
    return new AnthropicModel({ ...rest, baseURL: baseURL.replace(/\/+$/, "").replace(/\/v1$/, ""), model, apiKey: apiKey || undefined, maxRetries });
  }
  throw new Error(`bothy: BOTHY_MODEL must be ${MODEL_BACKENDS.join(" or ")}, not '${which}'`);
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
