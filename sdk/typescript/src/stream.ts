/**
 * The agent's event stream by WebSocket: the agentEvents subscription
 * over graphql-transport-ws (graphql-ws, with the ws package since Node 20
 * has no global WebSocket), handed to the adapter as the same pages as the
 * long poll.
 * @module
 */
import { createClient, type Client as WSClient } from "graphql-ws";
import WebSocket from "ws";
import { SUBSCRIPTION_AGENT_EVENTS, normalisePayload, type Client } from "./client.js";
import { AbortedError, NetworkError, refusal } from "./errors.js";
import type { AgentEvent, EventPage } from "./types.js";

/** The server does not upgrade /graphql to WebSocket: read the stream by long poll. */
export class NoWebSocketError extends Error {
  constructor(detail: string) {
    super(`bothy: the server does not upgrade to WebSocket (${detail})`);
    this.name = "NoWebSocketError";
  }
}

/** Reads the stream over one subscription, restarted from the cursor after any close. */
export class AgentStream {
  #ws: WSClient | undefined;
  #unsubscribe: (() => void) | undefined;
  #pos: string | undefined;
  #queue: AgentEvent[] = [];
  #error: Error | undefined;
  #wake: (() => void) | undefined;
  #everConnected = false;
  // Each subscription has a generation: callbacks of a disposed one (its
  // socket's close arrives after dispose) must not touch the next one.
  #gen = 0;

  constructor(private readonly client: Client) {}

  /**
   * The next page after cursor after, waiting at most waitSeconds; a
   * cursor other than where the subscription stands starts it anew there.
   */
  async next(after: string, waitSeconds: number, signal: AbortSignal): Promise<EventPage> {
    if (this.#error) {
      const err = this.#error;
      this.#stop();
      throw err;
    }
    if (!this.#unsubscribe || this.#pos !== after) this.#start(after);
    if (this.#queue.length === 0) {
      await new Promise<void>((resolve) => {
        const t = setTimeout(done, waitSeconds * 1000);
        function done() {
          clearTimeout(t);
          signal.removeEventListener("abort", done);
          resolve();
        }
        this.#wake = done;
        signal.addEventListener("abort", done, { once: true });
      });
      this.#wake = undefined;
    }
    if (signal.aborted) throw new AbortedError("AgentEvents");
    const events = this.#queue.splice(0);
    if (events.length === 0 && this.#error) {
      const err = this.#error;
      this.#stop();
      throw err;
    }
    if (events.length > 0) this.#pos = events[events.length - 1]!.seq;
    return { events, nextAfter: this.#pos ?? "" };
  }

  /** Ends the subscription and its socket. */
  close(): void {
    this.#stop();
  }

  #start(after: string): void {
    this.#stop();
    this.#error = undefined;
    this.#pos = after;
    const gen = ++this.#gen;
    const url = new URL(this.client.endpoint);
    url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
    const token = this.client.token;
    let upgradeStatus = 0;
    let connected = false;
    const ws = createClient({
      url: url.toString(),
      webSocketImpl: WebSocket,
      connectionParams: { Authorization: `Bearer ${token}` },
      lazy: true,
      retryAttempts: 0,
      on: {
        // A server without WebSocket answers the upgrade with a plain HTTP
        // status, which ws reports as "Unexpected server response: 404";
        // the auto transport falls back to the long poll then.
        error: (e) => {
          const msg = String((e as { message?: unknown })?.message ?? (e as { error?: { message?: unknown } })?.error?.message ?? "");
          const m = /Unexpected server response: (\d+)/.exec(msg);
          if (m) upgradeStatus = Number(m[1]);
        },
        connected: () => {
          connected = true;
          this.#everConnected = true;
        },
      },
    });
    this.#ws = ws;
    const fail = (err: Error) => {
      if (gen !== this.#gen) return;
      this.#error = err;
      this.#wake?.();
    };
    const vars: Record<string, unknown> = {};
    if (after !== "") vars.after = after;
    this.#unsubscribe = ws.subscribe<{ agentEvents: AgentEvent }>(
      { query: SUBSCRIPTION_AGENT_EVENTS, variables: vars },
      {
        next: (r) => {
          if (gen !== this.#gen) return;
          if (r.errors && r.errors.length > 0) {
            fail(refusal("AgentEvents", r.errors as never, 200));
            return;
          }
          if (r.data?.agentEvents) {
            this.#queue.push(normalisePayload(r.data.agentEvents));
            this.#wake?.();
          }
        },
        error: (e) => {
          const code = typeof (e as { code?: unknown })?.code === "number" ? (e as { code: number }).code : 0;
          if (code === 4401 || code === 4403) {
            fail(refusal("AgentEvents", [{ message: "the server closed the subscription: the token does not authenticate", extensions: { code: "unauthorized", status: 401 } }], 401));
          } else if (code === 4406 || code === 4429) {
            fail(refusal("AgentEvents", [{ message: `the server refused the subscription (${code})`, extensions: { code: "forbidden", status: 403 } }], 403));
          } else if (!connected && !this.#everConnected && upgradeStatus >= 400 && upgradeStatus !== 429 && upgradeStatus < 500) {
            fail(new NoWebSocketError(`status ${upgradeStatus}`));
          } else {
            fail(new NetworkError("AgentEvents", code ? `the server closed the subscription (${code}${(e as { reason?: string }).reason ? ": " + (e as { reason?: string }).reason : ""})` : e));
          }
        },
        complete: () => fail(new NetworkError("AgentEvents", "the server completed the subscription")),
      },
    );
  }

  #stop(): void {
    this.#gen++;
    this.#unsubscribe?.();
    this.#unsubscribe = undefined;
    void this.#ws?.dispose();
    this.#ws = undefined;
    this.#queue = [];
  }
}
