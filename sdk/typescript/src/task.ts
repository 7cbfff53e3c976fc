/**
 * A run as the handler sees it, the tool gate and approvals
 * (docs/adapter.md, approvals and the tool gate).
 * @module
 */
import { AsyncLocalStorage } from "node:async_hooks";
import type { ApprovalRequest, Client } from "./client.js";
import { NoApproverError, NotApprovedError, errorKind } from "./errors.js";
import type { LiveWriter } from "./live.js";
import { cutBytes } from "./live.js";
import type { Logger } from "./log.js";
import { promptWith, readFileTexts, type RunFiles } from "./files.js";
import type { FileText, Prompt } from "./render.js";
import { InPlay, inputUnknown } from "./trust.js";
import type { Approval, RunContext, RunContextMessage, Trust } from "./types.js";

/** A tool the model may call. */
export interface Tool {
  /** The name the model calls it by (1 to 64 of letters, digits, `_` and `-`). */
  name: string;
  description?: string;
  /** The JSON schema of the arguments (default `{"type": "object"}`). */
  parameters?: Record<string, unknown>;
  /** A consequential tool changes something outside the chat: it runs behind the gate. */
  consequential?: boolean;
  /** How far what the tool returns may be trusted: UNVERIFIED (the default) or SYSTEM. */
  outputTrust?: Trust;
  /** Runs the tool with the model's arguments (a JSON text) and returns what the model reads. */
  call(args: string, signal: AbortSignal): Promise<string>;
}

/** The approve option of the approval card the gate posts. */
export const OPTION_APPROVE = "approve";
/** The deny option of the gate's card. */
export const OPTION_DENY = "deny";

/** How long an approval is read again when its decision event did not come. */
const approvalPollMs = 5_000;

/** Asks the run's person and receives the decisions of the stream. */
export class Approver {
  #wait = new Map<string, (a: Approval) => void>();
  constructor(
    private readonly client: Client,
    private readonly runId: string,
    private readonly holder: string,
    private readonly traceparent?: string,
  ) {}

  /** A decision of the stream (agent.approval_decided). */
  decided(id: string, a: Approval): void {
    this.#wait.get(id)?.(a);
  }

  /** Posts the card and waits for the person's decision; the option chosen, `""` when it expired. */
  async ask(req: ApprovalRequest, signal: AbortSignal): Promise<string> {
    const call = { signal, traceparent: this.traceparent };
    const ap = await this.client.requestApproval(this.runId, this.holder, req, call);
    try {
      return await new Promise<string>((resolve, reject) => {
        const clean = () => {
          clearInterval(tick);
          signal.removeEventListener("abort", stop);
        };
        const settle = (a: Approval) => {
          clean();
          resolve(optionOf(a));
        };
        const stop = () => {
          clean();
          reject(signal.reason ?? new Error("aborted"));
        };
        // The decision event is the fast path; reading the card again
        // covers a decision whose event this process did not get.
        const tick = setInterval(() => {
          this.client.approval(ap.id, call).then(
            (cur) => cur.state !== "PENDING" && settle(cur),
            () => {},
          );
        }, approvalPollMs);
        this.#wait.set(ap.id, settle);
        signal.addEventListener("abort", stop, { once: true });
        if (signal.aborted) stop();
      });
    } finally {
      this.#wait.delete(ap.id);
    }
  }
}

function optionOf(a: Approval): string {
  return a.state === "DECIDED" && a.option ? a.option.id : "";
}

const current = new AsyncLocalStorage<Task>();

/**
 * The Task of the run whose handler (or model call) runs now, or
 * undefined outside a run. Model backends use it to stream into the live
 * box and to keep the tool gate on the run's in-play trust.
 */
export function currentTask(): Task | undefined {
  return current.getStore();
}

/** Runs fn with task as the current Task. */
export function withTask<T>(task: Task, fn: () => T): T {
  return current.run(task, fn);
}

/** What the adapter gives a Task of a run. */
export interface TaskParts {
  prompt: Prompt;
  play: InPlay;
  signal: AbortSignal;
  followUps?: RunContextMessage[];
  live?: LiveWriter;
  approver?: Approver;
  log?: Logger;
  /** The run's files (attachFile, fileText); none for a Task outside a run. */
  files?: RunFiles;
}

/**
 * One round of a run for the handler: the context and its prompt, the
 * follow-ups not shown before, the run's in-play trust, and the answer.
 * {@link Task.signal} aborts when a person cancels the run, when the person
 * who asked loses the right to, or when another process took the run over.
 */
export class Task {
  /** The prompt: rules in the system message, the context in fenced blocks. */
  readonly prompt: Prompt;
  /** Ends the handler's work: a cancel, a loss of trigger, a lost claim, the adapter stopping. */
  readonly signal: AbortSignal;
  readonly #fresh: RunContextMessage[];
  readonly #play: InPlay;
  readonly #live?: LiveWriter;
  readonly #approver?: Approver;
  readonly #files?: RunFiles;
  /** The log of the run (ids only). */
  readonly log?: Logger;
  /** @internal the handler's answer. */
  answerText = "";
  /** @internal the reason the handler failed the run. */
  failReason = "";
  /** @internal whether the handler answered or failed. */
  done = false;

  constructor(parts: TaskParts) {
    this.prompt = parts.prompt;
    this.signal = parts.signal;
    this.#fresh = parts.followUps ?? [];
    this.#play = parts.play;
    this.#live = parts.live;
    this.#approver = parts.approver;
    this.#files = parts.files;
    this.log = parts.log;
  }

  /** A Task for a conversation outside a run: its in-play trust starts at the prompt's lowest; nobody can approve. */
  static forPrompt(prompt: Prompt, signal: AbortSignal = new AbortController().signal): Task {
    const play = new InPlay(prompt.lowest);
    play.noteElements(allElements(prompt.context));
    return new Task({ prompt, play, signal });
  }

  /** The run's id. */
  get runId(): string {
    return this.prompt.context.runId;
  }

  /** The run's context, every element with the trust the server decided. */
  get context(): RunContext {
    return this.prompt.context;
  }

  /** The follow-ups the handler has not been shown before in this run. */
  get followUps(): RunContextMessage[] {
    return this.#fresh;
  }

  /** The run's in-play trust: the lowest of everything its model has read. */
  inPlay(): Trust {
    return this.#play.level;
  }

  /** Lowers the in-play trust for something the handler read itself. */
  lower(t: Trust): void {
    this.#play.lowerOther(t);
  }

  /**
   * Uploads content as a file named name and attaches it to the run's
   * answer: every retry and replay of the answer carries it. A later round
   * (follow-ups) attaches anew; the same name and content is not uploaded
   * twice. Returns the file's id.
   * @throws NoFilesOutError without the capability files_out.
   */
  async attachFile(name: string, content: Uint8Array | string): Promise<string> {
    if (!this.#files) throw new Error("bothy: this Task has no connection to the server; it attaches no files");
    const bytes = typeof content === "string" ? new TextEncoder().encode(content) : content;
    return this.#files.attach(name, bytes, this.signal);
  }

  /**
   * Reads the text of a file of the run's context (the text API). It is
   * data whoever uploaded it: show it to a model only as fileTextBlock
   * renders it. Reading lowers the in-play trust to UNVERIFIED, so a
   * consequential tool after it needs the person's approval.
   */
  async fileText(fileId: string): Promise<FileText> {
    if (!this.#files) throw new Error("bothy: this Task has no connection to the server; it reads no files");
    this.#play.lowerFile();
    return this.#files.client.fileText(fileId, 0, { signal: this.signal });
  }

  /**
   * The prompt with the text of every READY file of the context appended as
   * DATA blocks with trust unverified; lowers the in-play trust when it
   * appended any.
   */
  async promptWithFiles(): Promise<Prompt> {
    if (!this.#files) return this.prompt;
    const texts = await readFileTexts(this.#files.client, this.prompt, this.signal);
    if (texts.length > 0) this.#play.lowerFile();
    return promptWith(this.prompt, texts);
  }

  /** Streams a piece of the answer into the live box (with `live` on). */
  stream(text: string): void {
    if (text) this.#live?.add(text);
  }

  /** Shows a status line in the live box ("searching the wiki"). */
  status(line: string): void {
    this.#live?.add("", cutBytes(line, 200));
  }

  /** The run's answer; the SDK posts it under the request's key once the handler returns. */
  answer(text: string): void {
    if (!text.trim()) throw new Error("bothy: an answer needs text");
    if (this.signal.aborted) throw this.signal.reason ?? new Error("bothy: the run was stopped");
    this.answerText = text;
    this.failReason = "";
    this.done = true;
  }

  /** Fails the run with a short reason without content (default model_error). */
  fail(reason = "model_error"): void {
    this.failReason = reason || "model_error";
    this.answerText = "";
    this.done = true;
  }

  /**
   * Asks the run's person (an approval card) and returns the option they
   * chose, `""` when the card expired.
   * @throws NoApproverError outside a run.
   */
  async ask(req: ApprovalRequest): Promise<string> {
    if (!this.#approver) throw new NoApproverError();
    return this.#approver.ask(req, this.signal);
  }

  /**
   * Runs a tool behind the gate: a read-only tool runs; a consequential
   * one runs at once only while the in-play trust passes the gate
   * (TRIGGER, SELF, SYSTEM and no other person's request in play),
   * otherwise only after the person who asked approved this very call.
   * The result lowers the in-play trust to the tool's output trust.
   * @throws NotApprovedError when the person did not approve; its text is what the model reads.
   */
  async runTool(tool: Tool, args: string): Promise<string> {
    if (tool.consequential && !this.#play.allowed()) {
      const inputs = this.#play.inputs();
      const why = inputs.length > 0 ? inputs.join(", ") : inputUnknown;
      const opt = await this.ask({
        title: cutBytes(`Run ${tool.name}?`, 200),
        detail: cutBytes(`The agent wants to call ${tool.name} ${why}. Arguments:\n${args}`, 8000),
        options: [
          { id: OPTION_APPROVE, label: "Approve" },
          { id: OPTION_DENY, label: "Deny" },
        ],
      });
      if (opt !== OPTION_APPROVE) throw new NotApprovedError(tool.name);
    }
    try {
      return await tool.call(args, this.signal);
    } finally {
      this.#play.lowerTool(tool.name, tool.outputTrust ?? "UNVERIFIED");
    }
  }

  /**
   * Runs a tool call of a model behind the gate and returns what the model
   * reads back: the output, the refusal, or that the tool failed. The log
   * says `tool ran`, `tool denied` or `tool failed`.
   */
  async toolAnswer(tool: Tool, args: string): Promise<string> {
    const fields = { tool: tool.name, consequential: !!tool.consequential };
    try {
      const out = await this.runTool(tool, args);
      this.log?.info("tool ran", { ...fields, in_play: this.inPlay().toLowerCase() });
      return out;
    } catch (err) {
      if (this.signal.aborted) throw err;
      if (err instanceof NotApprovedError) {
        this.log?.info("tool denied", { ...fields, in_play: this.inPlay().toLowerCase() });
        return err.text;
      }
      this.log?.warn("tool failed", { ...fields, error_kind: errorKind(err), in_play: this.inPlay().toLowerCase() });
      return `The tool ${tool.name} failed.`;
    }
  }
}

function allElements(rc: RunContext): RunContextMessage[] {
  return [...(rc.channelContext ?? []), ...rc.threadContext, rc.triggerMessage, ...rc.followUps];
}

/** The name of {@link attachFileTool}. */
export const ATTACH_FILE_TOOL = "attach_file";

/**
 * A tool a model calls to attach a text file to its answer
 * (Task.attachFile, which needs files_out): arguments content and name
 * (default answer.txt). Not consequential: the file goes where the answer
 * goes.
 */
export function attachFileTool(): Tool {
  return {
    name: ATTACH_FILE_TOOL,
    description: "Attach a text file to your answer in the chat (a report, a table as CSV, code). Everyone who reads your answer can download it.",
    parameters: {
      type: "object",
      properties: { content: { type: "string", description: "the file's text" }, name: { type: "string", description: "the file's name, e.g. report.md" } },
      required: ["content"],
    },
    // What the model reads back is the SDK's own line.
    outputTrust: "SYSTEM",
    async call(args: string): Promise<string> {
      const task = currentTask();
      if (!task) throw new Error("bothy: attach_file runs only in a run");
      const a = JSON.parse(args) as { content?: unknown; name?: unknown };
      const name = typeof a.name === "string" && a.name.trim() ? a.name.trim() : "answer.txt";
      await task.attachFile(name, typeof a.content === "string" ? a.content : "");
      return `Attached ${name} to your answer.`;
    },
  };
}
