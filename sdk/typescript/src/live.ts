/**
 * The live box (docs/adapter.md, the live box): what the model streams
 * reaches the run's box while it writes, pieces sent together at most
 * every interval, so every reader of the thread sees the answer grow.
 * @module
 */
import type { Client } from "./client.js";
import { errorReason } from "./errors.js";
import type { Logger } from "./log.js";

/** The status a person's stop leaves in the box. */
export const STOPPED_STATUS = "stopped";

/** Writes one run's live box. A failure other than a version race turns it off: the answer follows as usual. */
export class LiveWriter {
  #version = 0;
  #text = "";
  #pending = "";
  #status: string | undefined;
  #reset = false;
  #off = false;
  #closed = false;
  #timer: NodeJS.Timeout | undefined;
  #lastSent = 0;
  #chain: Promise<void> = Promise.resolve();

  constructor(
    private readonly client: Client,
    private readonly runId: string,
    private readonly holder: string,
    private readonly intervalMs: number,
    private readonly log: Logger,
    private readonly signal: AbortSignal,
    private readonly traceparent?: string,
  ) {}

  /** Adds a piece of the answer, or a status line (at most 200 bytes). */
  add(text: string, status?: string): void {
    if (this.#off || this.#closed) return;
    this.#pending += text;
    if (status !== undefined) this.#status = cutBytes(status, 200);
    if (this.#timer) return;
    const wait = Math.max(0, this.#lastSent + this.intervalMs - Date.now());
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.#chain = this.#chain.then(() => this.#send(false));
    }, wait);
  }

  /** A new round of the model: the box starts again empty. */
  restart(): void {
    this.#pending = "";
    this.#reset = true;
  }

  /** Stops writing: the answer holds the text now. Waits for an update in flight. */
  async close(): Promise<void> {
    this.#closed = true;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    await this.#chain;
  }

  /** Marks the box done with status stopped (a person's stop). */
  async stopped(): Promise<void> {
    await this.close();
    await this.#send(true, STOPPED_STATUS, true);
  }

  async #send(final: boolean, status?: string, force = false): Promise<void> {
    if (this.#off || (this.#closed && !force)) return;
    const piece = this.#pending;
    this.#pending = "";
    const st = status ?? this.#status;
    this.#status = undefined;
    let replace: string | undefined;
    if (this.#reset) {
      replace = "";
      this.#reset = false;
      this.#text = "";
    }
    if (!piece && st === undefined && replace === undefined && !final) return;
    this.#lastSent = Date.now();
    let u = { baseVersion: this.#version, append: piece, replace, status: st, done: final };
    // The stopped mark goes out even after the run's signal ended: it is
    // what the readers of the thread see of the stop.
    const signal = final ? undefined : this.signal;
    for (let attempt = 0; attempt < 2; attempt++) {
      try {
        const box = await this.client.updateRunLive(this.runId, this.holder, u, { signal, traceparent: this.traceparent });
        this.#version = box.version;
        if (u.replace !== undefined) this.#text = u.replace;
        this.#text += u.append;
        return;
      } catch (err) {
        if (errorReason(err) !== "live_version" || attempt > 0) {
          this.#off = true;
          if (!this.signal.aborted) this.log.info("live box not written; the answer follows as usual", { reason: errorReason(err) });
          return;
        }
      }
      try {
        // Another writer moved the box: write the whole text again on top
        // of its version.
        const cur = await this.client.runLive(this.runId, { signal, traceparent: this.traceparent });
        u = { baseVersion: cur.version, append: "", replace: this.#text + u.append, status: u.status, done: final };
      } catch {
        this.#off = true;
        return;
      }
    }
  }
}

/** Cuts s to at most n bytes of UTF-8 without splitting a character. */
export function cutBytes(s: string, n: number): string {
  const b = Buffer.from(s, "utf8");
  if (b.length <= n) return s;
  let end = n;
  while (end > 0 && (b[end]! & 0xc0) === 0x80) end--;
  return b.subarray(0, end).toString("utf8");
}
