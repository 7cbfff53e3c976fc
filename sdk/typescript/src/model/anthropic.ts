/**
 * A model backend for Anthropic's Messages API, on the official
 * `@anthropic-ai/sdk` package (an optional peer dependency).
 * @module
 */
import type Anthropic from "@anthropic-ai/sdk";
import { BadModelAnswerError } from "../errors.js";
import type { Prompt } from "../render.js";
import type { Tool } from "../task.js";
import { LENGTH_NOTE, modelError, taskFor, type Model } from "./common.js";

/** Configures {@link AnthropicModel}. */
export interface AnthropicConfig {
  /** The model to ask for. */
  model: string;
  /** Sent as x-api-key. */
  apiKey?: string;
  /** The API root (default https://api.anthropic.com; the library posts to {base}/v1/messages). */
  baseURL?: string;
  /** Ask for a streamed answer, so that it grows in the run's live box. */
  stream?: boolean;
  /** The tools the model may call, behind the gate. */
  tools?: Tool[];
  /** Bounds each answer (default 1024). */
  maxTokens?: number;
  /** Bounds the whole answer in ms (default 120 000). */
  timeoutMs?: number;
  /** Repeats of a request on 429 and 5xx, after Retry-After (default 2). */
  maxRetries?: number;
  /** Rounds of tool calls before the model must answer in text (default 8). */
  maxToolRounds?: number;
}

/**
 * Answers with a message: the prompt's rules as `system`, its blocks as
 * the one user message. Tool calls run through {@link Task.toolAnswer}
 * (the gate) until the model answers in text.
 */
export class AnthropicModel implements Model {
  readonly #cfg: AnthropicConfig;
  #client: Promise<Anthropic> | undefined;

  /** @throws Error when model is empty. */
  constructor(cfg: AnthropicConfig) {
    if (!cfg.model?.trim()) throw new Error("anthropic: the model name is empty");
    this.#cfg = cfg;
  }

  #anthropic(): Promise<Anthropic> {
    this.#client ??= import("@anthropic-ai/sdk").then(
      ({ default: AnthropicClient }) =>
        new AnthropicClient({
          apiKey: this.#cfg.apiKey ?? null,
          baseURL: this.#cfg.baseURL?.replace(/\/+$/, "") || undefined,
          maxRetries: this.#cfg.maxRetries ?? 2,
          timeout: this.#cfg.timeoutMs ?? 120_000,
        }),
    );
    return this.#client;
  }

  /** {@inheritDoc Model.answer} */
  async answer(prompt: Prompt, signal?: AbortSignal): Promise<string> {
    const task = taskFor(prompt, signal);
    const sig = AbortSignal.any([signal ?? task.signal, AbortSignal.timeout(this.#cfg.timeoutMs ?? 120_000)]);
    const client = await this.#anthropic();
    const tools = this.#cfg.tools ?? [];
    const messages: Anthropic.MessageParam[] = [{ role: "user", content: prompt.user }];
    const defs = tools.map((t) => ({ name: t.name, description: t.description || undefined, input_schema: (t.parameters ?? { type: "object" }) as Anthropic.Tool.InputSchema }));
    const rounds = this.#cfg.maxToolRounds ?? 8;
    for (let round = 0; ; round++) {
      const params = { model: this.#cfg.model, max_tokens: this.#cfg.maxTokens ?? 1024, system: prompt.system, messages, ...(round < rounds && defs.length > 0 ? { tools: defs } : {}) };
      let msg: Anthropic.Message;
      try {
        if (this.#cfg.stream) {
          const s = client.messages.stream(params, { signal: sig });
          s.on("text", (piece) => task.stream(piece));
          msg = await s.finalMessage();
        } else {
          msg = await client.messages.create(params, { signal: sig });
        }
      } catch (err) {
        throw modelError(err, sig);
      }
      if (!msg || !Array.isArray(msg.content)) throw new BadModelAnswerError("no content");
      const uses = msg.content.filter((b): b is Anthropic.ToolUseBlock => b.type === "tool_use");
      const text = msg.content
        .filter((b): b is Anthropic.TextBlock => b.type === "text")
        .map((b) => b.text)
        .join("");
      if (uses.length === 0) {
        if (!text.trim()) throw new BadModelAnswerError("empty answer");
        return msg.stop_reason === "max_tokens" ? text + LENGTH_NOTE : text;
      }
      messages.push({ role: "assistant", content: msg.content });
      const results: Anthropic.ToolResultBlockParam[] = [];
      for (const use of uses) {
        const tool = tools.find((t) => t.name === use.name);
        const out = tool ? await task.toolAnswer(tool, JSON.stringify(use.input ?? {})) : `There is no tool named ${use.name.replace(/[^A-Za-z0-9_-]/g, "_")}.`;
        results.push({ type: "tool_result", tool_use_id: use.id, content: out });
      }
      messages.push({ role: "user", content: results });
    }
  }
}
