/**
 * The acknowledgement ledger (docs/adapter.md, acknowledging the stream).
 * Acknowledging an agent.followup event delivers its follow-up, and the
 * acknowledgement is positional, so the stream is acknowledged only up to
 * the last of the longest run of events that are dealt with: never past a
 * follow-up the run's model has not seen.
 * @module
 */
import type { AgentEvent } from "./types.js";

interface Entry {
  seq: string;
  n: number | null;
  followup: boolean;
  runId: string;
  message: string;
  resolved: boolean;
  reported: boolean;
  since: number;
}

interface RunAcks {
  covered: Set<string>;
  delivered: Set<string>;
}

/** The follow-up an event names, when it is an agent.followup. */
export function followupRef(ev: AgentEvent): { runId: string; messageId: string } | null {
  if (ev.type !== "agent.followup") return null;
  const runId = typeof ev.payload.run_id === "string" ? ev.payload.run_id : "";
  const messageId = typeof ev.payload.message_id === "string" ? ev.payload.message_id : "";
  return runId && messageId ? { runId, messageId } : null;
}

function parseSeq(s: string): number | null {
  return /^\d+$/.test(s) ? Number(s) : null;
}

/**
 * The events read and not yet acknowledged, and what each waits for. An
 * agent.followup is dealt with once the model of the run this process
 * holds has seen it ({@link Acks.cover}), once its run ended
 * ({@link Acks.release}, {@link Acks.runEnded}), or once the stored
 * position passed it (another process acknowledged it).
 */
export class Acks {
  #pending: Entry[] = [];
  #stored: number | null = null;
  #lastAcked = "";
  #runs = new Map<string, RunAcks>();
  #waiters = new Set<() => void>();
  /** Called whenever the target may have moved (the acknowledger wakes up). */
  onChange: () => void = () => {};

  /** Starts keeping the follow-ups of a run this process holds. */
  track(runId: string): void {
    if (!this.#runs.has(runId)) this.#runs.set(runId, { covered: new Set(), delivered: new Set() });
  }

  /** Whether this process holds the run. */
  tracks(runId: string): boolean {
    return this.#runs.has(runId);
  }

  /** Notes an event read from the stream; dealt is false for an event left to a later process. */
  add(ev: AgentEvent, dealt: boolean, now = Date.now()): void {
    const ref = followupRef(ev);
    const e: Entry = { seq: ev.seq, n: parseSeq(ev.seq), followup: false, runId: "", message: "", resolved: dealt, reported: false, since: now };
    if (dealt && ref) {
      e.followup = true;
      e.runId = ref.runId;
      e.message = ref.messageId;
      e.resolved = this.#runs.get(ref.runId)?.covered.has(ref.messageId) ?? false;
      if (this.#stored !== null && e.n !== null && e.n <= this.#stored) {
        e.resolved = true;
        this.#noteDelivered(e);
      }
    }
    this.#pending.push(e);
  }

  /** The model of runId has seen these follow-ups: their events may be acknowledged. */
  cover(runId: string, messageIds: string[]): void {
    const r = this.#runs.get(runId);
    if (r) {
      for (const m of messageIds) r.covered.add(m);
      for (const e of this.#pending) if (e.followup && e.runId === runId && r.covered.has(e.message)) e.resolved = true;
    }
    this.onChange();
  }

  /** This process is done with runId; when it ended, its follow-up events are dealt with (the server settled them). */
  release(runId: string, ended: boolean): void {
    this.#runs.delete(runId);
    if (ended) this.#resolveRun(runId);
    this.onChange();
  }

  /** A run this process does not hold has ended: its follow-ups hold the position no longer. */
  runEnded(runId: string): void {
    if (!this.#runs.has(runId)) this.#resolveRun(runId);
  }

  /** The seq to acknowledge up to: the last of the longest prefix of dealt-with events ("" for none). */
  target(): string {
    let seq = "";
    for (const e of this.#pending) {
      if (!e.resolved) break;
      seq = e.seq;
    }
    return seq;
  }

  /** The seq last acknowledged by this process. */
  last(): string {
    return this.#lastAcked;
  }

  /**
   * The first event not dealt with: report is true the first time it is
   * asked for, due when it is a follow-up of a run this process does not
   * hold whose run should be read again (every intervalMs).
   */
  head(now: number, intervalMs: number): { runId: string; seq: string; message: string; report: boolean; due: boolean } | null {
    for (const h of this.#pending) {
      if (h.resolved) continue;
      if (!h.followup) return null;
      const report = !h.reported;
      h.reported = true;
      let due = false;
      if (!this.#runs.has(h.runId) && now - h.since >= intervalMs) {
        h.since = now;
        due = true;
      }
      return { runId: h.runId, seq: h.seq, message: h.message, report, due };
    }
    return null;
  }

  /** The acknowledgement up to upTo went through and the server's stored position is position. */
  acked(upTo: string, position: string): void {
    this.#lastAcked = upTo;
    const n = parseSeq(position);
    if (n !== null && (this.#stored === null || n > this.#stored)) this.#stored = n;
    let cut = this.#pending.findIndex((e) => e.seq === upTo) + 1;
    for (let i = 0; i < this.#pending.length; i++) {
      const e = this.#pending[i]!;
      const passed = this.#stored !== null && e.n !== null && e.n <= this.#stored;
      if (i > cut || (i === cut && !passed)) break;
      this.#noteDelivered(e);
      cut = Math.max(cut, i + 1);
    }
    this.#pending = this.#pending.slice(cut);
    for (const w of [...this.#waiters]) w();
  }

  /** Whether these follow-ups of runId are delivered (acknowledged). */
  delivered(runId: string, messageIds: string[]): boolean {
    const r = this.#runs.get(runId);
    return !r || messageIds.every((m) => r.delivered.has(m));
  }

  /** Waits until these follow-ups of runId are delivered, or the signal ends. */
  async awaitDelivered(runId: string, messageIds: string[], signal: AbortSignal): Promise<boolean> {
    while (!this.delivered(runId, messageIds)) {
      if (signal.aborted) return false;
      this.onChange();
      await new Promise<void>((resolve) => {
        const done = () => {
          this.#waiters.delete(done);
          signal.removeEventListener("abort", done);
          resolve();
        };
        this.#waiters.add(done);
        signal.addEventListener("abort", done, { once: true });
      });
    }
    return true;
  }

  #resolveRun(runId: string): void {
    for (const e of this.#pending) if (e.followup && e.runId === runId) e.resolved = true;
  }

  #noteDelivered(e: Entry): void {
    if (e.followup) this.#runs.get(e.runId)?.delivered.add(e.message);
  }
}
