/**
 * A model backend for OpenAI and every server that speaks its chat
 * completions API (Azure OpenAI, Ollama, vLLM, ...), on the official
 * `openai` package (an optional peer dependency).
 * @module
 */
import type OpenAI from "openai";
import { BadModelAnswerError } from "../errors.js";
import type { Prompt } from "../render.js";
import type { Tool } from "../task.js";
import { LENGTH_NOTE, modelError, taskFor, type Model } from "./common.js";

/** Configures {@link OpenAIModel}. */
export interface OpenAIConfig {
  /** The API root, such as https://api.openai.com/v1 ({base}/chat/completions). */
  baseURL: string;
  /** The model to ask for. */
  model: string;
  /** Sent as a bearer token; none when empty. */
  apiKey?: string;
  /** Ask for a streamed answer, so that it grows in the run's live box. */
  stream?: boolean;
  /** The tools the model may call, behind the gate. */
  tools?: Tool[];
  /** Bounds each answer's tokens (the server's default when absent). */
  maxTokens?: number;
  /** Bounds the whole answer, retries and tool calls included, in ms (default 120 000). */
  timeoutMs?: number;
  /** Attempts of one request on 429, 5xx and network errors, after Retry-After (default 4). */
  maxAttempts?: number;
  /** Rounds of tool calls before the model must answer in text (default 8). */
  maxToolRounds?: number;
}

type Message = OpenAI.Chat.Completions.ChatCompletionMessageParam;
type ToolCall = { id: string; type: "function"; function: { name: string; arguments: string } };

/**
 * Answers with a chat completion: the prompt's rules as the system
 * message, its blocks as the user message. Tool calls run through
 * {@link Task.toolAnswer} (the gate) until the model answers in text.
 */
export class OpenAIModel implements Model {
  readonly #cfg: OpenAIConfig;
  #client: Promise<OpenAI> | undefined;

  /** @throws Error when baseURL is no absolute http(s) URL without query, or model is empty. */
  constructor(cfg: OpenAIConfig) {
    let u: URL | undefined;
    try {
      u = new URL(cfg.baseURL.trim());
    } catch {
      u = undefined;
    }
    if (!u || (u.protocol !== "http:" && u.protocol !== "https:") || u.search || u.hash) {
      throw new Error("openai: the model base URL must be an absolute http or https URL without query");
    }
    if (!cfg.model?.trim()) throw new Error("openai: the model name is empty");
    this.#cfg = cfg;
  }

  #openai(): Promise<OpenAI> {
    this.#client ??= import("openai").then(
      ({ default: OpenAIClient }) =>
        new OpenAIClient({
          baseURL: this.#cfg.baseURL.replace(/\/+$/, ""),
          // An empty key sends no Authorization at all, also when
          // OPENAI_API_KEY is set in the environment.
          apiKey: this.#cfg.apiKey || "unused",
          defaultHeaders: this.#cfg.apiKey ? {} : { Authorization: null },
          // The library repeats 429, 5xx and network errors after Retry-After.
          maxRetries: Math.max(0, (this.#cfg.maxAttempts ?? 4) - 1),
          timeout: this.#cfg.timeoutMs ?? 120_000,
        }),
    );
    return this.#client;
  }

  /** {@inheritDoc Model.answer} */
  async answer(prompt: Prompt, signal?: AbortSignal): Promise<string> {
    const task = taskFor(prompt, signal);
    const sig = AbortSignal.any([signal ?? task.signal, AbortSignal.timeout(this.#cfg.timeoutMs ?? 120_000)]);
    const client = await this.#openai();
    const tools = this.#cfg.tools ?? [];
    const messages: Message[] = [
      { role: "system", content: prompt.system },
      { role: "user", content: prompt.user },
    ];
    const defs = tools.map((t) => ({ type: "function" as const, function: { name: t.name, description: t.description || undefined, parameters: t.parameters ?? { type: "object" } } }));
    const rounds = this.#cfg.maxToolRounds ?? 8;
    for (let round = 0; ; round++) {
      const offer = round < rounds && defs.length > 0 ? { tools: defs } : {};
      const base = { model: this.#cfg.model, messages, ...offer, ...(this.#cfg.maxTokens ? { max_tokens: this.#cfg.maxTokens } : {}) };
      let content = "";
      let calls: ToolCall[] = [];
      let finish: string | null = null;
      try {
        if (this.#cfg.stream) {
          const s = await client.chat.completions.create({ ...base, stream: true }, { signal: sig });
          let choices = 0;
          for await (const chunk of s) {
            const c = chunk.choices?.[0];
            if (!c) continue;
            choices++;
            if (c.delta?.content) {
              content += c.delta.content;
              task.stream(c.delta.content);
            }
            for (const d of c.delta?.tool_calls ?? []) {
              const cur = (calls[d.index] ??= { id: "", type: "function", function: { name: "", arguments: "" } });
              if (d.id) cur.id = d.id;
              if (d.function?.name) cur.function.name += d.function.name;
              if (d.function?.arguments) cur.function.arguments += d.function.arguments;
            }
            if (c.finish_reason) finish = c.finish_reason;
          }
          if (choices === 0) throw new BadModelAnswerError("no choices");
          calls = calls.filter(Boolean);
        } else {
          const r = await client.chat.completions.create(base, { signal: sig });
          const c = r?.choices?.[0];
          if (!c || !c.message) throw new BadModelAnswerError("no choices");
          if (c.message.content != null && typeof c.message.content !== "string") throw new BadModelAnswerError("content is no text");
          content = c.message.content ?? "";
          calls = (c.message.tool_calls ?? []).filter((t): t is ToolCall => t.type === "function");
          finish = c.finish_reason;
        }
      } catch (err) {
        throw modelError(err, sig);
      }
      if (calls.length === 0) {
        if (!content.trim()) throw new BadModelAnswerError("empty answer");
        return finish === "length" ? content + LENGTH_NOTE : content;
      }
      messages.push({ role: "assistant", content: content || null, tool_calls: calls });
      for (const call of calls) {
        const tool = tools.find((t) => t.name === call.function.name);
        const out = tool ? await task.toolAnswer(tool, call.function.arguments) : `There is no tool named ${call.function.name.replace(/[^A-Za-z0-9_-]/g, "_")}.`;
        messages.push({ role: "tool", tool_call_id: call.id, content: out });
      }
    }
  }
}
