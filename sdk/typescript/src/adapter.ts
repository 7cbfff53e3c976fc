/**
 * The adapter: follows the agent's event stream and answers every run
 * with a handler, keeping the run contract of docs/adapter.md (claims and
 * renewals, fencing, acknowledgements only after handling, follow-ups,
 * answer keys, the live box, cancel, approvals, the outbox), as the Go
 * SDK's agent.Run does.
 * @module
 */
import { Acks } from "./acks.js";
import { answerKey, answeredBeyond, answeredUpTo, requestStands, requestsOf } from "./answers.js";
import { Client, newHolder, validHolder, type CallOptions } from "./client.js";
import {
  AbortedError,
  BadModelAnswerError,
  FailError,
  IdempotencyKeyReusedError,
  NotFoundError,
  RunClaimedError,
  RunNotActiveError,
  TriggerRevokedError,
  errorCode,
  errorKind,
  errorReason,
  isTemporary,
  type BothyError,
} from "./errors.js";
import { LiveWriter } from "./live.js";
import { stderrLogger, withFields, type Logger } from "./log.js";
import { RunFiles } from "./files.js";
import { Outbox } from "./outbox.js";
import { render, withFollowUps } from "./render.js";
import { AgentStream, NoWebSocketError } from "./stream.js";
import { Approver, Task, withTask } from "./task.js";
import { InPlay } from "./trust.js";
import {
  elementsOf,
  isActive,
  type AgentEvent,
  type EventPage,
  type Invocation,
  type MessageResult,
  type Outcome,
  type RunContext,
  type RunContextMessage,
  type RunInfo,
  type Trust,
} from "./types.js";

/** Configures {@link run}. Only a token is required; every other field has the default it names. */
export interface Config {
  /** The server's address (`https://chat.example.com`); with token it makes the client. */
  server?: string;
  /** The agent's token. */
  token?: string;
  /** A client of your own instead of server and token. */
  client?: Client;
  /** Where the SDK logs ids, event types, outcomes and error codes (default: JSON lines on stderr from info on). */
  logger?: Logger;
  /** How the stream is read: `auto` (default: WebSocket, the long poll where there is none), `ws` or `poll`. */
  transport?: "auto" | "ws" | "poll";
  /** The long poll's wait in seconds (default 25). */
  pollWaitSeconds?: number;
  /** The cursor to start from; `""` (default) continues after the acknowledged position, `"0"` reads from the start. */
  after?: string;
  /** Names this process in its claims (default `adapter-` and 16 random hex digits). */
  holder?: string;
  /** Return once the first run handled has ended; later invocations are left to a later process. */
  once?: boolean;
  /** Attempts of one idempotent call on temporary errors (default 5). */
  maxAttempts?: number;
  /** The first pause between attempts in ms (default 500); it doubles up to 10 s, or follows Retry-After. */
  retryBackoffMs?: number;
  /** How often per run the handler is asked again for follow-ups that came while it worked (default 3; negative: never). */
  followUpRounds?: number;
  /** How long to wait before posting for the delivery of the follow-ups the answer covers, in ms (default 120 000). */
  deliveryWaitMs?: number;
  /** Called once per handled run after the adapter is done with it. */
  onRunDone?: (report: RunReport) => void;
  /** How many handlers run at once (default: no bound); runs beyond it are claimed and their leases kept while they wait. */
  maxConcurrent?: number;
  /** A folder where every answer is written before it is sent (the answer outbox); off by default. */
  outbox?: string;
  /** Write what the handler streams into the run's live box (off by default). */
  live?: boolean;
  /** The least time between two updates of a live box in ms (default 100). */
  liveIntervalMs?: number;
  /** Ends {@link run}: runs in flight are finished FAILED adapter_stopped. */
  signal?: AbortSignal;
}

/** How the adapter left one run. */
export interface RunReport {
  runId: string;
  threadId: string;
  /** What finishRun set; `""` when the run had ended without it. */
  outcome: Outcome | "";
  /** The id of the posted answer, `""` when none was posted. */
  answerMessageId: string;
  /** The answer's clientMsgId (the key of the last request it covers). */
  answerKey: string;
  /** The handler's rounds: 1, plus one per round for follow-ups. */
  rounds: number;
  /** Why a reply was not posted (trigger_revoked, cancelled, answered, ...), `""` otherwise. */
  dropped: string;
  /** Why the run did not complete; undefined on success. */
  error?: Error;
}

/** Handles one round of a run: answer with {@link Task.answer} or fail with {@link Task.fail}. */
export type Handler = (task: Task) => Promise<void> | void;

interface ActiveRun {
  abort: AbortController;
  cancelRequested: boolean;
  /** The server says this process no longer holds the run. */
  lost: boolean;
  /** The server said the run has ended. */
  ended: boolean;
  approver: Approver;
}

const minPollIntervalMs = 1_000;
const ackEveryMs = 1_000;
const blockerCheckEveryMs = 3_000;
const minRenewIntervalMs = 200;
const stopTimeoutMs = 10_000;
/** How long the auto transport reads by long poll after a subscription closed on a temporary failure. */
const wsPauseMs = 30_000;

/** Waits ms or until signal ends; reports whether ms passed. */
function sleep(ms: number, signal?: AbortSignal): Promise<boolean> {
  if (ms <= 0) return Promise.resolve(!signal?.aborted);
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve(false);
    const t = setTimeout(() => {
      signal?.removeEventListener("abort", stop);
      resolve(true);
    }, ms);
    const stop = () => {
      clearTimeout(t);
      resolve(false);
    };
    signal?.addEventListener("abort", stop, { once: true });
  });
}

function errFields(err: unknown): Record<string, unknown> {
  if (err && typeof err === "object" && "code" in err && "status" in err) {
    const e = err as BothyError;
    return { code: e.code, reason: e.reason, status: e.status };
  }
  return { error: err instanceof Error ? err.message : String(err) };
}

/**
 * Follows the agent's stream and answers every run with handler until
 * config.signal ends (or, with once, until the first handled run ended).
 * It first proves the token with viewer and refuses a principal that is
 * not an agent.
 * @throws Error for a Config that makes no client, a token that is refused or not an agent's, a stream that refuses the cursor.
 */
export async function run(config: Config, handler: Handler): Promise<void> {
  await new Adapter(config, handler).run();
}

/** The adapter behind {@link run}, for callers that want its holder or cursor. */
export class Adapter {
  /** The holder that names this process in its claims. */
  readonly holder: string;
  readonly #cfg: Required<Pick<Config, "pollWaitSeconds" | "maxAttempts" | "retryBackoffMs" | "followUpRounds" | "deliveryWaitMs" | "liveIntervalMs">> & Config;
  readonly #client: Client;
  readonly #handler: Handler;
  readonly #log: Logger;
  readonly #outer: AbortSignal;
  readonly #active = new Map<string, ActiveRun>();
  readonly #runs = new Set<Promise<void>>();
  readonly #acks = new Acks();
  #cursor: string;
  #box: Outbox | undefined;
  #ackChain: Promise<void> = Promise.resolve();
  #kick: (() => void) | undefined;
  #slots: number;
  #slotWaiters: (() => void)[] = [];

  /** @throws Error when the config makes no client or names an invalid holder or transport. */
  constructor(config: Config, handler: Handler) {
    if (typeof handler !== "function") throw new Error("bothy: run needs a handler");
    let client = config.client;
    if (!client) {
      if (!config.token) throw new Error("bothy: Config needs a token (or a client)");
      client = new Client(config.server ?? "", config.token);
    }
    const transport = config.transport ?? "auto";
    if (!["auto", "ws", "poll"].includes(transport)) throw new Error(`bothy: unknown transport ${transport} (poll, ws or auto)`);
    this.holder = config.holder || newHolder();
    if (!validHolder(this.holder)) throw new Error("bothy: a holder is 1 to 128 letters, digits, '.', '_', ':' or '-'");
    this.#cfg = {
      ...config,
      transport,
      pollWaitSeconds: config.pollWaitSeconds && config.pollWaitSeconds > 0 ? config.pollWaitSeconds : 25,
      maxAttempts: config.maxAttempts && config.maxAttempts > 0 ? config.maxAttempts : 5,
      retryBackoffMs: config.retryBackoffMs && config.retryBackoffMs > 0 ? config.retryBackoffMs : 500,
      followUpRounds: config.followUpRounds || 3,
      deliveryWaitMs: config.deliveryWaitMs && config.deliveryWaitMs > 0 ? config.deliveryWaitMs : 120_000,
      liveIntervalMs: config.liveIntervalMs && config.liveIntervalMs > 0 ? config.liveIntervalMs : 100,
    };
    this.#client = client;
    this.#handler = handler;
    this.#log = config.logger ?? stderrLogger();
    this.#outer = config.signal ?? new AbortController().signal;
    this.#cursor = config.after ?? "";
    this.#slots = config.maxConcurrent && config.maxConcurrent > 0 ? config.maxConcurrent : Infinity;
    this.#acks.onChange = () => this.#kick?.();
  }

  /** The cursor after the last event read; persist it to resume there (Config.after). */
  get cursor(): string {
    return this.#cursor;
  }

  /** Runs the adapter (see {@link run}). */
  async run(): Promise<void> {
    const me = await this.#retry("Viewer", (s) => this.#client.viewer({ signal: s }), this.#outer).catch((err) => {
      throw new Error(`bothy: prove the token: ${err instanceof Error ? err.message : err}`, { cause: err });
    });
    if (me.kind !== "AGENT") throw new Error(`bothy: the token belongs to a principal of kind ${me.kind.toLowerCase()}, not to an agent`);
    this.#log.info("adapter started", { agent_id: me.id, once: !!this.#cfg.once, holder: this.holder });
    if (this.#cfg.outbox) {
      this.#box = await Outbox.open(this.#cfg.outbox);
      // Answers a process before this one wrote and did not see
      // confirmed go first, before any run of this process.
      await this.#replayOutbox();
    }
    // The loop's signal ends the reads; runs use the outer signal, so
    // that ending the loop with once does not end the run that ends it.
    const loop = new AbortController();
    const stopLoop = () => loop.abort();
    this.#outer.addEventListener("abort", stopLoop, { once: true });
    let stream: AgentStream | undefined;
    let polling = this.#cfg.transport === "poll";
    // pollUntil: after a subscription closed on a temporary failure (1013:
    // the database away) the stream is read by long poll for a while
    // before the subscription is tried again, so that reading goes on
    // whichever of the two the server can serve first.
    let pollUntil = 0;
    const poll = (after: string) => this.#client.agentEvents(after, this.#cfg.pollWaitSeconds, { signal: loop.signal });
    const next = async (after: string): Promise<EventPage> => {
      if (polling || Date.now() < pollUntil) return poll(after);
      stream ??= new AgentStream(this.#client);
      try {
        return await stream.next(after, this.#cfg.pollWaitSeconds, loop.signal);
      } catch (err) {
        if (this.#cfg.transport === "auto" && err instanceof NoWebSocketError) {
          this.#log.warn("no WebSocket at the server: reading the stream by long poll from now on", errFields(err));
          polling = true;
          stream.close();
          return poll(after);
        }
        if (this.#cfg.transport === "auto" && isTemporary(err) && !loop.signal.aborted) {
          this.#log.warn("subscription closed; reading the stream by long poll for a while", { ...errFields(err), poll_ms: wsPauseMs });
          pollUntil = Date.now() + wsPauseMs;
          return poll(after);
        }
        throw err;
      }
    };
    const acker = this.#ackLoop(loop.signal);
    let claimed = { value: false };
    let backoff = this.#cfg.retryBackoffMs;
    let failure: Error | undefined;
    try {
      while (!loop.signal.aborted) {
        const began = Date.now();
        let page: EventPage;
        try {
          page = await next(this.#cursor);
        } catch (err) {
          if (loop.signal.aborted) break;
          const code = errorCode(err);
          if (code === "unauthorized" || code === "forbidden" || code === "validation_failed" || code === "invalid_cursor") {
            // Retrying cannot help: a revoked token, or a cursor the server does not know.
            failure = new Error(`bothy: poll the agent stream: ${(err as Error).message}`, { cause: err });
            break;
          }
          const pause = Math.max(backoff, (err as BothyError).retryAfterMs ?? 0);
          this.#log.warn("poll failed", { ...errFields(err), retry_in_ms: pause });
          await sleep(pause, loop.signal);
          backoff = Math.min(backoff * 2, 30_000);
          continue;
        }
        backoff = this.#cfg.retryBackoffMs;
        for (const ev of page.events) {
          const dealt = await this.#handle(ev, loop, claimed);
          // The ledger decides how far the stream may be acknowledged.
          this.#acks.add(ev, dealt);
          this.#cursor = ev.seq;
        }
        if (page.nextAfter) this.#cursor = page.nextAfter;
        this.#kick?.();
        if (page.events.length === 0) await sleep(minPollIntervalMs - (Date.now() - began), loop.signal);
      }
    } finally {
      loop.abort();
      stream?.close();
      this.#outer.removeEventListener("abort", stopLoop);
      await Promise.allSettled([...this.#runs]);
      await acker;
      // Runs that ended while the loop stopped released their follow-ups:
      // acknowledge what is dealt with, so the next process does not read it again.
      await this.#ackOnce(AbortSignal.timeout(stopTimeoutMs), false);
    }
    if (failure) throw failure;
  }

  async #ackLoop(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      await new Promise<void>((resolve) => {
        const t = setTimeout(done, ackEveryMs);
        function done() {
          clearTimeout(t);
          signal.removeEventListener("abort", done);
          resolve();
        }
        this.#kick = done;
        signal.addEventListener("abort", done, { once: true });
      });
      this.#kick = undefined;
      if (!signal.aborted) await this.#ackOnce(signal, true);
    }
  }

  // ackOnce sends one acknowledgement up to the ledger's target when it
  // moved. A follow-up of another process's run that holds the position
  // has its run read when due: an ended run releases it, an active one
  // makes the acknowledgement go out unmoved, because its answer says
  // whether the other process's acknowledgement passed the follow-up.
  #ackOnce(signal: AbortSignal, check: boolean): Promise<void> {
    const step = async () => {
      let learn = false;
      const head = this.#acks.head(Date.now(), blockerCheckEveryMs);
      if (head?.report) this.#log.debug("acknowledgement held at a follow-up its run's model has not seen", { seq: head.seq, run_id: head.runId, message_id: head.message });
      if (check && head?.due) {
        try {
          const state = await this.#client.runState(head.runId, { signal });
          if (!isActive(state)) this.#acks.runEnded(head.runId);
          else learn = true;
        } catch (err) {
          if (err instanceof NotFoundError) this.#acks.runEnded(head.runId);
        }
      }
      let upTo = this.#acks.target();
      const last = this.#acks.last();
      if (upTo === "" || upTo === last) {
        if (!learn) return;
        // A process that never acknowledged learns the stored position too.
        upTo = last || "0";
      }
      try {
        const pos = await this.#client.ackAgentEvents(upTo, { signal });
        this.#acks.acked(upTo, pos);
      } catch (err) {
        if (!signal.aborted) this.#log.warn("ack failed", errFields(err));
      }
    };
    this.#ackChain = this.#ackChain.then(step, step);
    return this.#ackChain;
  }

  // handle acts on one event. Invocations are prepared here, in stream
  // order (context read, then start), and answered on their own; cancel
  // requests and follow-ups only touch the run's record. It reports
  // whether the event is dealt with (false only for an invocation that
  // once leaves to a later process).
  async #handle(ev: AgentEvent, loop: AbortController, claimed: { value: boolean }): Promise<boolean> {
    const p = ev.payload;
    const str = (k: string) => (typeof p[k] === "string" ? (p[k] as string) : "");
    const log = withFields(this.#log, { seq: ev.seq, type: ev.type });
    switch (ev.type) {
      case "agent.invocation": {
        const inv = p as unknown as Invocation;
        if (!str("run_id") || !str("thread_id")) {
          log.error("invocation payload without run or thread id");
          return true;
        }
        const rlog = withFields(log, { run_id: inv.run_id, thread_id: inv.thread_id });
        if (this.#cfg.once && claimed.value) {
          rlog.info("invocation not handled: once has a run already");
          return false;
        }
        if (this.#active.has(inv.run_id)) return true;
        const prepared = await this.#prepare(rlog, inv, loop.signal);
        if (!prepared) return true;
        claimed.value = true;
        const [rc, started] = prepared;
        const tp = started.traceparent || inv.traceparent || undefined;
        const abort = new AbortController();
        const onOuter = () => abort.abort(new AbortedError("run"));
        this.#outer.addEventListener("abort", onOuter, { once: true });
        const r: ActiveRun = { abort, cancelRequested: false, lost: false, ended: false, approver: new Approver(this.#client, inv.run_id, this.holder, tp) };
        this.#active.set(inv.run_id, r);
        // Tracked before the next event is handled: the run's follow-up
        // events, which come after its invocation, wait for its model.
        this.#acks.track(inv.run_id);
        const work = this.#answer(rlog, r, inv, rc, started, tp).then(
          (rep) => {
            this.#active.delete(inv.run_id);
            this.#outer.removeEventListener("abort", onOuter);
            abort.abort();
            this.#acks.release(inv.run_id, r.ended);
            this.#cfg.onRunDone?.(rep);
            if (this.#cfg.once) loop.abort();
          },
          (err) => {
            this.#active.delete(inv.run_id);
            this.#acks.release(inv.run_id, r.ended);
            rlog.error("run failed in the adapter", errFields(err));
            if (this.#cfg.once) loop.abort();
          },
        );
        this.#runs.add(work);
        void work.finally(() => this.#runs.delete(work));
        return true;
      }
      case "agent.followup":
        // The run reads the follow-up's content from the run context after
        // the handler's answer; the ledger keeps the acknowledgement in
        // front of the event until the model has seen it.
        log.debug("follow-up noted", { run_id: str("run_id"), message_id: str("message_id"), held_here: this.#active.has(str("run_id")) });
        return true;
      case "agent.approval_decided": {
        const r = this.#active.get(str("run_id"));
        r?.approver.decided(str("approval_id"), {
          id: str("approval_id"),
          messageId: "",
          state: str("state").toUpperCase(),
          option: str("option_id") ? { id: str("option_id"), label: "" } : null,
        });
        return true;
      }
      case "run.cancel_requested": {
        const runId = str("run_id");
        if (!runId) {
          log.error("cancel payload without run id");
          return true;
        }
        const r = this.#active.get(runId);
        if (r) {
          r.cancelRequested = true;
          r.abort.abort(new AbortedError("run cancelled"));
          log.info("cancel requested for a run in progress", { run_id: runId });
          return true;
        }
        await this.#confirmUntrackedCancel(withFields(log, { run_id: runId }), runId, loop.signal);
        return true;
      }
    }
    log.debug("event type not handled");
    return true;
  }

  // prepare reads the run's context and then starts the run: the adapter
  // commits to a run only once it holds what it needs to answer.
  async #prepare(log: Logger, inv: Invocation, signal: AbortSignal): Promise<[RunContext, RunInfo] | null> {
    const call = (s: AbortSignal): CallOptions => ({ signal: s, traceparent: inv.traceparent });
    let rc: RunContext;
    try {
      rc = await this.#retry("RunContext", (s) => this.#client.runContext(inv.run_id, call(s)), signal);
    } catch (err) {
      if (err instanceof NotFoundError) {
        // An own run that is no longer active answers not_found: an old
        // invocation, read again from the stream.
        log.info("invocation skipped: the run is no longer active");
        return null;
      }
      if (signal.aborted) return null;
      log.error("run context unreadable", errFields(err));
      await this.#finish(log, undefined, inv.run_id, "FAILED", "context_unavailable", inv.traceparent);
      return null;
    }
    let started: RunInfo;
    try {
      started = await this.#retry("StartRun", (s) => this.#client.startRun(inv.run_id, this.holder, call(s)), signal);
    } catch (err) {
      if (err instanceof RunNotActiveError) log.info("invocation skipped: the run ended before its start");
      else if (err instanceof RunClaimedError) log.info("invocation skipped: another adapter process holds the run");
      else if (err instanceof TriggerRevokedError) log.info("invocation skipped: the run's person lost trigger");
      else if (!signal.aborted) {
        log.error("run start refused", errFields(err));
        await this.#finish(log, undefined, inv.run_id, "FAILED", "start_failed", inv.traceparent);
      }
      return null;
    }
    log.info("run started", { session_mode: (inv.session?.mode ?? "").toLowerCase(), elements: elementsOf(rc).length, attempt: inv.attempt, answers: started.answers?.length ?? 0, lowest: rc.trustSummary?.lowest });
    return [rc, started];
  }

  // keepLease renews the claim every third of the lease while the handler
  // works. run_claimed: another process holds the run, stop. Trigger
  // revoked: stop and confirm the cancel. run_not_active: stop unless the
  // ending left the request standing (its answer goes out without run id).
  async #keepLease(log: Logger, r: ActiveRun, runId: string, until: string | null, tp: string | undefined, signal: AbortSignal): Promise<void> {
    const left = until ? Date.parse(until) - Date.now() : 60_000;
    const every = Math.max(minRenewIntervalMs, left / 3);
    while (await sleep(every, signal)) {
      try {
        await this.#client.renewRun(runId, this.holder, { signal, traceparent: tp });
      } catch (err) {
        if (signal.aborted) return;
        if (err instanceof TriggerRevokedError) {
          log.info("the run's person lost trigger while the model worked");
          r.cancelRequested = true;
          r.abort.abort(err);
          return;
        }
        if (err instanceof RunNotActiveError) {
          try {
            const info = await this.#client.run(runId, { signal, traceparent: tp });
            if (requestStands(info.state, info.endReason)) {
              log.info("the run ended while the model worked; its answer will go out without run id", { state: info.state.toLowerCase(), end_reason: info.endReason });
              return;
            }
            log.info("the run ended while the model worked; stopping the model", { state: info.state.toLowerCase(), end_reason: info.endReason });
          } catch {
            // Unreadable: the answer would be dropped anyway.
          }
          r.ended = true;
          r.lost = true;
          r.abort.abort(err);
          return;
        }
        if (err instanceof RunClaimedError) {
          log.warn("claim lost while the model worked", { reason: err.reason });
          r.lost = true;
          r.abort.abort(err);
          return;
        }
        // A temporary failure: the next tick tries again within the lease.
        log.warn("lease renewal failed", errFields(err));
      }
    }
  }

  async #acquire(signal: AbortSignal): Promise<void> {
    while (this.#slots <= 0) {
      if (signal.aborted) throw signal.reason ?? new AbortedError("run");
      await new Promise<void>((resolve) => {
        this.#slotWaiters.push(resolve);
        signal.addEventListener("abort", () => resolve(), { once: true });
      });
    }
    this.#slots--;
  }

  #releaseSlot(): void {
    this.#slots++;
    this.#slotWaiters.shift()?.();
  }

  // answer asks the handler, posts the answer and finishes the run. After
  // every answer, before posting, it reads the context again: follow-ups
  // that came meanwhile go to the handler in a new round, up to
  // followUpRounds. The answer covers the trigger and the follow-ups of
  // its prompt and is posted under the key of the last of them, once those
  // follow-ups are delivered.
  async #answer(log: Logger, r: ActiveRun, inv: Invocation, first: RunContext, started: RunInfo, tp: string | undefined): Promise<RunReport> {
    const rep: RunReport = { runId: inv.run_id, threadId: inv.thread_id, outcome: "", answerMessageId: "", answerKey: "", rounds: 0, dropped: "" };
    const began = Date.now();
    const signal = r.abort.signal;
    const lease = this.#keepLease(log, r, inv.run_id, started.leaseExpiresAt, tp, signal);
    try {
      let rc = first;
      const trigger = started.triggeringMessageId || inv.message_id || rc.triggerMessage.messageId;
      const all = requestsOf(trigger, rc.followUps);
      if (answeredUpTo(inv.run_id, all, started.answers) === all.length) {
        // A takeover of a run whose earlier holder answered every request
        // and died before finishing: nothing is answered twice.
        log.info("every request of the run has an answer of an earlier holder; finishing it", { answers: started.answers?.length ?? 0 });
        this.#acks.cover(inv.run_id, rc.followUps.map((f) => f.messageId));
        if (await this.#deliver(log, r, rep, rc.followUps, rc, tp)) return rep;
        rep.outcome = await this.#finish(log, r, inv.run_id, "COMPLETED", "", tp);
        return rep;
      }
      const lw = this.#cfg.live ? new LiveWriter(this.#client, inv.run_id, this.holder, this.#cfg.liveIntervalMs, log, signal, tp) : undefined;
      const boundary = render(rc).boundary;
      let play: InPlay | undefined;
      const files = new RunFiles(this.#client);
      let text = "";
      let shown: RunContextMessage[] = [];
      let latest = rc;
      let gone = false;
      const seen = new Set<string>();
      for (;;) {
        rep.rounds++;
        if (lw && rep.rounds > 1) lw.restart();
        const prompt = withFollowUps(render(rc, boundary), rc.followUps);
        if (!play) play = new InPlay(prompt.lowest);
        else play.lowerContext(prompt.lowest);
        play.noteElements(elementsOf(prompt.context));
        files.newRound();
        const task = new Task({ prompt, play, signal, followUps: rc.followUps.filter((f) => !seen.has(f.messageId)), live: lw, approver: r.approver, log, files });
        let failure: unknown;
        try {
          await this.#acquire(signal);
          try {
            await withTask(task, () => this.#handler(task));
          } finally {
            this.#releaseSlot();
          }
          for (const f of task.followUps) seen.add(f.messageId);
          if (task.failReason) failure = new FailError(task.failReason);
          else if (!task.done) failure = new Error("bothy: the handler returned without an answer");
          else if (!task.answerText.trim()) failure = new BadModelAnswerError("empty answer");
        } catch (err) {
          failure = err;
        }
        // Stopped by a person: the box says so before the cancel is confirmed.
        if (lw && r.cancelRequested && !r.lost) await lw.stopped();
        if (await this.#interrupted(log, r, rep, tp)) return rep;
        if (failure !== undefined) {
          // The model's error text may quote the prompt: log only its kind.
          const reason = failure instanceof FailError ? failure.reason : "model_error";
          log.warn("model failed", { error_kind: errorKind(failure), error_type: (failure as Error)?.name, reason, round: rep.rounds, model_ms: Date.now() - began });
          rep.outcome = await this.#finish(log, r, inv.run_id, "FAILED", reason, tp);
          rep.error = failure instanceof Error ? failure : new Error(String(failure));
          return rep;
        }
        text = task.answerText;
        shown = rc.followUps;
        // The model has seen these follow-ups: they may be delivered now.
        this.#acks.cover(inv.run_id, shown.map((f) => f.messageId));
        let next: RunContext | undefined;
        let readErr: unknown;
        try {
          next = await this.#retry("RunContext", (s) => this.#client.runContext(inv.run_id, { signal: s, traceparent: tp }), this.#outer);
        } catch (err) {
          readErr = err;
        }
        if (await this.#interrupted(log, r, rep, tp)) return rep;
        if (readErr instanceof NotFoundError) {
          // The run ended, or its person lost trigger, while the model
          // worked: afterEnd reads which, before anything is posted.
          gone = true;
          break;
        }
        if (!next) {
          log.warn("run context unreadable after the model's answer; posting the answer without looking for follow-ups", errFields(readErr));
          break;
        }
        latest = next;
        const known = new Set(shown.map((f) => f.messageId));
        const fresh = next.followUps.filter((f) => !known.has(f.messageId)).map((f) => f.messageId);
        if (fresh.length === 0) break;
        if (this.#cfg.followUpRounds < 0 || rep.rounds > this.#cfg.followUpRounds) {
          // The server promotes the follow-ups the model has not seen to the next run.
          log.info("follow-ups left to the next run: the rounds for follow-ups are used up", { rounds: rep.rounds, left: fresh.length, message_ids: fresh });
          break;
        }
        log.info("follow-ups arrived while the model worked; asking it again", { round: rep.rounds + 1, message_ids: fresh });
        rc = next;
      }
      // The answer holds the text now; what the box still gathers is dropped.
      await lw?.close();
      const reqs = requestsOf(trigger, shown);
      rep.answerKey = answerKey(inv.run_id, reqs[reqs.length - 1]!);
      const input = play!.level;
      const attached = files.ids();
      if (gone) return await this.#afterEnd(log, r, inv, rep, reqs, text, input, tp, attached);
      // Delivered before posting: a follow-up still pending when the run
      // completes would start the next run and be answered twice.
      if (await this.#deliver(log, r, rep, shown, latest, tp)) return rep;
      let msg: MessageResult;
      try {
        // The answer declares what it was derived from: everything the
        // model read in the run, tool results included.
        msg = await this.#post(inv.thread_id, rep.answerKey, text, inv.run_id, input, tp, attached);
      } catch (err) {
        if (err instanceof IdempotencyKeyReusedError) {
          // The key holds another text: an earlier holder answered this request.
          log.info("the request has an answer under its key already; finishing the run");
          rep.dropped = "answered";
          rep.outcome = await this.#finish(log, r, inv.run_id, "COMPLETED", "", tp);
          return rep;
        }
        if (err instanceof RunNotActiveError) return await this.#afterEnd(log, r, inv, rep, reqs, text, input, tp, attached);
        if (err instanceof TriggerRevokedError) {
          // Nothing was stored, and the run waits for this holder to confirm its cancel.
          log.info("reply dropped: the run's person lost trigger", { reason: err.reason });
          rep.dropped = "trigger_revoked";
          rep.outcome = await this.#finish(log, r, inv.run_id, "CANCELLED", "", tp);
          rep.error = new Error("bothy: the run's person lost trigger; the reply was dropped");
          return rep;
        }
        if (err instanceof RunClaimedError) {
          log.warn("answer refused: another adapter process holds the run now");
          r.lost = true;
          rep.error = err;
          return rep;
        }
        if (this.#outer.aborted) return await this.#stopped(log, r, rep, tp);
        log.error("answer refused", errFields(err));
        rep.outcome = await this.#finish(log, r, inv.run_id, r.cancelRequested ? "CANCELLED" : "FAILED", r.cancelRequested ? "" : "answer_rejected", tp);
        rep.error = err as Error;
        return rep;
      }
      rep.answerMessageId = msg.message.id;
      // A cancel that arrived while the answer was being posted is answered
      // by completing: the answer is visible, the work is done.
      rep.outcome = await this.#finish(log, r, inv.run_id, "COMPLETED", "", tp);
      log.info("run answered", { message_id: msg.message.id, client_msg_id: rep.answerKey, replayed: msg.replayed, rounds: rep.rounds, followups: shown.length, input_trust: input.toLowerCase(), outcome: rep.outcome.toLowerCase(), ms: Date.now() - began });
      return rep;
    } finally {
      r.abort.abort();
      await lease;
    }
  }

  // interrupted checks, after a step that may have taken long, whether the
  // run is still this process's to answer; true when it is done with.
  async #interrupted(log: Logger, r: ActiveRun, rep: RunReport, tp: string | undefined): Promise<boolean> {
    if (r.lost && r.ended) {
      rep.error = new Error("bothy: the run ended while the model worked");
      return true;
    }
    if (r.lost) {
      // Another process holds the run now and answers it.
      rep.error = new Error("bothy: the claim on the run was lost");
      return true;
    }
    if (r.cancelRequested) {
      // Whatever the model has is dropped: the person cancelled, or lost
      // trigger and with it the request.
      log.info("run cancelled before its answer; nothing is posted");
      rep.outcome = await this.#finish(log, r, rep.runId, "CANCELLED", "", tp);
      rep.error = new Error("bothy: the run was cancelled");
      return true;
    }
    if (this.#outer.aborted) {
      await this.#stopped(log, r, rep, tp);
      return true;
    }
    return false;
  }

  // deliver waits until the follow-ups an answer covers are delivered, so
  // that the run's end absorbs them instead of promoting them.
  async #deliver(log: Logger, r: ActiveRun, rep: RunReport, covered: RunContextMessage[], latest: RunContext, tp: string | undefined): Promise<boolean> {
    const state = new Map(latest.followUps.map((f) => [f.messageId, f.alreadyDelivered]));
    const wait = covered.filter((f) => state.has(f.messageId) && !state.get(f.messageId)).map((f) => f.messageId);
    if (wait.length > 0) {
      const ok = await this.#acks.awaitDelivered(rep.runId, wait, AbortSignal.any([r.abort.signal, AbortSignal.timeout(this.#cfg.deliveryWaitMs)]));
      if (!ok && !r.abort.signal.aborted) {
        log.warn("follow-ups not delivered in time; answering anyway, the server may answer them again in a next run", { message_ids: wait, waited_ms: this.#cfg.deliveryWaitMs });
      }
    }
    return this.#interrupted(log, r, rep, tp);
  }

  // afterEnd decides about a reply whose run was found ended, or its
  // context gone, before the reply was posted with the run's id.
  async #afterEnd(
    log: Logger,
    r: ActiveRun,
    inv: Invocation,
    rep: RunReport,
    reqs: string[],
    text: string,
    input: Trust,
    tp: string | undefined,
    attached: string[],
  ): Promise<RunReport> {
    let info: RunInfo;
    try {
      info = await this.#retry("Run", (s) => this.#client.run(inv.run_id, { signal: s, traceparent: tp }), this.#outer);
    } catch (err) {
      if (this.#outer.aborted) return this.#stopped(log, r, rep, tp);
      log.warn("reply dropped: the run is unreadable, so how it ended is unknown", errFields(err));
      rep.dropped = "run_unreadable";
      rep.error = err as Error;
      return rep;
    }
    if (isActive(info.state)) {
      // The context of an active run is gone only when its person lost
      // trigger; the run waits for this holder to confirm the cancel.
      log.info("reply dropped: the run's person lost trigger");
      rep.dropped = "trigger_revoked";
      rep.outcome = await this.#finish(log, r, inv.run_id, "CANCELLED", "", tp);
      rep.error = new Error("bothy: the run's person lost trigger; the reply was dropped");
      return rep;
    }
    r.ended = true;
    const state = info.state.toLowerCase();
    const reason = info.endReason ?? "";
    if (!requestStands(info.state, reason)) {
      log.info("reply dropped: the run ended and took the request away", { state, end_reason: reason });
      rep.dropped = reason || state;
      rep.error = new Error(`bothy: the run ended ${state} (${reason}) before its answer; the reply was dropped`);
      return rep;
    }
    if (answeredUpTo(inv.run_id, reqs, info.answers) === reqs.length || answeredBeyond(inv.run_id, reqs, info.answers)) {
      log.info("reply dropped: the run ended and its requests have answers", { state, end_reason: reason });
      rep.dropped = "answered";
      return rep;
    }
    // Nothing was stored with the run's id, so the key is free: the reply
    // reaches the people as a plain agent message.
    log.info("run ended before the answer; sending it without run id", { state, end_reason: reason });
    try {
      const msg = await this.#post(inv.thread_id, rep.answerKey, text, "", input, tp, attached);
      rep.answerMessageId = msg.message.id;
      log.info("answer posted after the run ended", { message_id: msg.message.id, client_msg_id: rep.answerKey, replayed: msg.replayed });
    } catch (err) {
      log.error("answer without run id refused", errFields(err));
      rep.error = err as Error;
    }
    return rep;
  }

  async #stopped(log: Logger, r: ActiveRun, rep: RunReport, tp: string | undefined): Promise<RunReport> {
    rep.outcome = await this.#finish(log, r, rep.runId, "FAILED", "adapter_stopped", tp, AbortSignal.timeout(stopTimeoutMs));
    rep.error = new Error("bothy: the adapter stopped");
    return rep;
  }

  // post sends text under key, naming run runId ("" names none) and
  // declaring input. Every retry sends the identical request, so the
  // server stores the message once and a repeat answers replayed.
  async #post(threadId: string, key: string, text: string, runId: string, input: Trust, tp: string | undefined, files: string[]): Promise<MessageResult> {
    const attached = files.length > 0 ? files : undefined;
    if (this.#box) {
      // On disk before it leaves: a process that dies now sends it at its next start.
      await this.#box.put({
        key,
        thread_id: threadId,
        run_id: runId || undefined,
        holder: this.holder,
        text,
        input_trust: input,
        attachment_file_ids: attached,
        written: new Date().toISOString(),
      });
    }
    const holder = runId ? this.holder : "";
    const input_ = { clientMsgId: key, contentMd: text, inputTrust: input, ...(runId ? { runId } : {}), ...(attached ? { attachmentFileIds: attached } : {}) };
    try {
      const res = await this.#retry("CreateMessage", (s) => this.#client.createMessage(threadId, holder, input_, { signal: s, traceparent: tp }), this.#outer);
      await this.#box?.remove(key);
      return res;
    } catch (err) {
      // Settled: the server refused it for good. A network failure keeps
      // the entry for the next start.
      if (!this.#outer.aborted && !isTemporary(err) && errorCode(err) !== "") await this.#box?.remove(key);
      throw err;
    }
  }

  // finish ends a run with outcome and returns the end state the server
  // set (finishing a run whose person lost trigger ends it cancelled), or
  // "" when it had ended already or the call failed.
  async #finish(log: Logger, r: ActiveRun | undefined, runId: string, outcome: Outcome, reason: string, tp: string | undefined, signal: AbortSignal = this.#outer): Promise<Outcome | ""> {
    try {
      const ended = await this.#retry("FinishRun", (s) => this.#client.finishRun(runId, this.holder, outcome, reason, { signal: s, traceparent: tp }), signal);
      if (r) r.ended = true;
      const got = ended.state === "COMPLETED" || ended.state === "FAILED" || ended.state === "CANCELLED" ? ended.state : outcome;
      log.info("run finished", { outcome: got.toLowerCase(), wanted: outcome.toLowerCase(), reason: ended.endReason });
      return got;
    } catch (err) {
      if (err instanceof RunNotActiveError) {
        if (r) r.ended = true;
        log.info("run had ended already", { wanted: outcome.toLowerCase() });
      } else {
        log.error("finish refused", { ...errFields(err), wanted: outcome.toLowerCase() });
      }
      return "";
    }
  }

  // confirmUntrackedCancel confirms the cancel of a run this process does
  // not hold (an earlier process started it): nobody works on it.
  async #confirmUntrackedCancel(log: Logger, runId: string, signal: AbortSignal): Promise<void> {
    let info: RunInfo;
    try {
      info = await this.#retry("Run", (s) => this.#client.run(runId, { signal: s }), signal);
    } catch (err) {
      if (!(err instanceof NotFoundError)) log.warn("cancelled run unreadable", errFields(err));
      return;
    }
    if (!isActive(info.state) || !info.cancelRequested) {
      log.debug("cancel request needs nothing", { state: info.state.toLowerCase() });
      return;
    }
    await this.#finish(log, undefined, runId, "CANCELLED", "", info.traceparent ?? undefined);
  }

  // replayOutbox sends every answer a process before this one left in the
  // outbox: under its key, naming its run, as the holder that wrote it.
  async #replayOutbox(): Promise<void> {
    const { entries, bad } = await this.#box!.pending();
    if (bad.length > 0) this.#log.warn("outbox: some entries are unreadable and stay", { files: bad });
    for (const e of entries) {
      const log = withFields(this.#log, { run_id: e.run_id, thread_id: e.thread_id, client_msg_id: e.key });
      const input = {
        clientMsgId: e.key,
        contentMd: e.text,
        inputTrust: e.input_trust ?? "UNVERIFIED",
        ...(e.run_id ? { runId: e.run_id } : {}),
        ...(e.attachment_file_ids?.length ? { attachmentFileIds: e.attachment_file_ids } : {}),
      };
      try {
        try {
          const res = await this.#retry("CreateMessage", (s) => this.#client.createMessage(e.thread_id, e.holder ?? "", input, { signal: s }), this.#outer);
          log.info("outbox: answer sent after a restart", { message_id: res.message.id, replayed: res.replayed });
        } catch (err) {
          if (!(err instanceof RunNotActiveError) || !e.run_id) throw err;
          const info = await this.#retry("Run", (s) => this.#client.run(e.run_id!, { signal: s }), this.#outer);
          if (isActive(info.state) || !requestStands(info.state, info.endReason)) {
            log.info("outbox: answer dropped: its run ended and took the request away", { state: info.state.toLowerCase(), end_reason: info.endReason });
          } else if (!(info.answers ?? []).some((a) => a.clientMsgId === e.key)) {
            const { runId: _drop, ...plain } = input as typeof input & { runId?: string };
            const res = await this.#retry("CreateMessage", (s) => this.#client.createMessage(e.thread_id, "", plain, { signal: s }), this.#outer);
            log.info("outbox: answer sent without its ended run after a restart", { message_id: res.message.id });
          }
        }
        await this.#box!.remove(e.key);
      } catch (err) {
        if (this.#outer.aborted || isTemporary(err) || errorCode(err) === "") {
          log.warn("outbox: answer not sent; it stays for the next start", errFields(err));
        } else {
          log.info("outbox: answer dropped: the server refused it", errFields(err));
          await this.#box!.remove(e.key);
        }
      }
    }
  }

  // retry runs fn until it succeeds, fails with an error that is not
  // temporary, maxAttempts is reached or signal ends. Only idempotent
  // calls go through it.
  async #retry<T>(op: string, fn: (signal: AbortSignal) => Promise<T>, signal: AbortSignal): Promise<T> {
    let delay = this.#cfg.retryBackoffMs;
    for (let attempt = 1; ; attempt++) {
      try {
        return await fn(signal);
      } catch (err) {
        if (!isTemporary(err) || attempt >= this.#cfg.maxAttempts || signal.aborted) throw err;
        const pause = Math.max(delay, (err as BothyError).retryAfterMs ?? 0);
        this.#log.warn("call failed, retrying", { ...errFields(err), op, attempt, retry_in_ms: pause });
        if (!(await sleep(pause, signal))) throw err;
        delay = Math.min(delay * 2, 10_000);
      }
    }
  }
}

