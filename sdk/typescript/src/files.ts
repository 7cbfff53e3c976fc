/**
 * Files (docs/design/trust.md#files): a handler reads the text of the files
 * attached to its run's context as data, never as an instruction, and
 * attaches files of its own to its answer when an owner granted the agent
 * the capability files_out. The Go SDK's Task.FileText and Task.AttachFile.
 */
import { createHash } from "node:crypto";
import type { Client } from "./client.js";
import { withFileTexts, type FileText, type Prompt } from "./render.js";
import { elementsOf } from "./types.js";

/** The most files one message attaches. */
export const MAX_ATTACHMENTS = 10;

/** Thrown by Task.attachFile for an agent without the capability files_out. */
export class NoFilesOutError extends Error {
  constructor() {
    super(
      'bothy: attaching files needs the capability files_out, which an owner grants the agent (PUT /api/v1/principals/{principal_id}/capabilities {"files_out": true})',
    );
    this.name = "NoFilesOutError";
  }
}

/**
 * What a run's Tasks share about files: the files uploaded in the run (by
 * name and digest, so that a later round attaching the same file reuses its
 * upload) and the files the current round attaches to the answer.
 */
export class RunFiles {
  #filesOut = false;
  readonly #uploaded = new Map<string, string>();
  #attached: string[] = [];
  #queue: Promise<unknown> = Promise.resolve();

  constructor(readonly client: Client) {}

  /** The answer of the last round is the one posted, with the files it attached. */
  newRound(): void {
    this.#attached = [];
  }

  /** The files the answer attaches, in the order attached. */
  ids(): string[] {
    return [...this.#attached];
  }

  /** Uploads (once per name and content) and attaches a file; returns its id. */
  attach(name: string, content: Uint8Array, signal?: AbortSignal): Promise<string> {
    // One at a time: two calls with the same file upload it once.
    const next = this.#queue.then(() => this.#attach(name, content, signal));
    this.#queue = next.catch(() => undefined);
    return next;
  }

  async #attach(name: string, content: Uint8Array, signal?: AbortSignal): Promise<string> {
    if (!this.#filesOut) {
      if (!(await this.client.filesOut({ signal }))) throw new NoFilesOutError();
      this.#filesOut = true;
    }
    const key = name + "\0" + createHash("sha256").update(content).digest("hex");
    let id = this.#uploaded.get(key);
    if (id === undefined) {
      if (this.#attached.length >= MAX_ATTACHMENTS) throw new Error(`bothy: an answer attaches at most ${MAX_ATTACHMENTS} files`);
      id = (await this.client.uploadFile(name, content, { signal })).id;
      this.#uploaded.set(key, id);
    }
    if (!this.#attached.includes(id)) {
      if (this.#attached.length >= MAX_ATTACHMENTS) throw new Error(`bothy: an answer attaches at most ${MAX_ATTACHMENTS} files`);
      this.#attached.push(id);
    }
    return id;
  }
}

/** The texts of the READY files of prompt's context, in its order; one that cannot be read is left out. */
export async function readFileTexts(client: Client, prompt: Prompt, signal?: AbortSignal): Promise<FileText[]> {
  const out: FileText[] = [];
  for (const m of elementsOf(prompt.context)) {
    for (const a of m.attachments ?? []) {
      if (a.textStatus !== "READY") continue;
      try {
        out.push(await client.fileText(a.fileId, 0, { signal }));
      } catch {
        // A file the run cannot read is left out.
      }
    }
  }
  return out;
}

/** prompt with texts appended as DATA blocks (withFileTexts). */
export function promptWith(prompt: Prompt, texts: FileText[]): Prompt {
  return texts.length > 0 ? withFileTexts(prompt, texts) : prompt;
}
