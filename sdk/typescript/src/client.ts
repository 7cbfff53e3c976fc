/**
 * The GraphQL client of an adapter: POST /graphql with the agent's token,
 * one method per operation of the run contract.
 * @module
 */
import { AbortedError, NetworkError, NotFoundError, refusal, type BothyError, type GraphQLErrorEntry } from "./errors.js";
import type { FileText } from "./render.js";
import type { Approval, ApprovalOption, EventPage, MessageResult, Outcome, RunContext, RunInfo, RunLive, Trust } from "./types.js";

/** Options of a {@link Client}. */
export interface ClientOptions {
  /** Bounds one call in milliseconds (default 30 000); a long poll adds its wait. */
  timeoutMs?: number;
  /** Sent with every request (default `bothy-agent-ts`). */
  userAgent?: string;
  /** The fetch to use (default the global fetch). */
  fetch?: typeof fetch;
}

/** Per-call options. */
export interface CallOptions {
  /** Aborts the call (a cancelled run, a stopping adapter). */
  signal?: AbortSignal;
  /** The run's W3C trace context, sent as the `traceparent` header. */
  traceparent?: string;
}

/** The REST header that names the holder of a claimed run. */
export const HOLDER_HEADER = "Bothy-Run-Holder";

const holderPattern = /^[A-Za-z0-9._:-]{1,128}$/;
const traceparentPattern = /^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$/;

/**
 * The headers that name a holder on a REST call of a claimed run
 * (`Bothy-Run-Holder`); none for the anonymous holder.
 * @throws RangeError when the holder is not 1 to 128 letters, digits, `.`, `_`, `:` or `-`.
 */
export function holderHeaders(holder: string): Record<string, string> {
  if (holder === "") return {};
  if (!holderPattern.test(holder)) throw new RangeError("bothy: a holder is 1 to 128 letters, digits, '.', '_', ':' or '-'");
  return { [HOLDER_HEADER]: holder };
}

/** Reports whether a holder id is one the server accepts. */
export function validHolder(holder: string): boolean {
  return holderPattern.test(holder);
}

/** A fresh holder id for one adapter process: `adapter-` and 16 random hex digits. */
export function newHolder(): string {
  const b = new Uint8Array(8);
  crypto.getRandomValues(b);
  return "adapter-" + Buffer.from(b).toString("hex");
}

/** The headers of a call of a run: `traceparent` when it has the W3C form, else none. */
export function traceHeaders(traceparent: string | undefined | null): Record<string, string> {
  return traceparent && traceparentPattern.test(traceparent) ? { traceparent } : {};
}

const runFields = `fragment RunFields on Run { id threadId state triggeringMessageId cancelRequested endReason attempt holder leaseExpiresAt traceparent }`;
const ctxFields = `fragment ContextMessage on RunContextMessage { messageId threadSeq createdAt channelId author { id kind handle displayName } role origin kind contentMd truncated attachments { fileId name mimeType size scanStatus transcript textStatus } replyToMessageId trust provenance alreadyDelivered }`;
const Q = {
  viewer: `query Viewer { viewer { id kind } }`,
  events: `query AgentEvents($after: String, $wait: Int) { agentEvents(after: $after, waitSeconds: $wait) { events { seq type createdAt payload } nextAfter } }`,
  context: `query RunContext($id: ID!) { run(id: $id) { context { runId contextFloorSeq triggerMessage { ...ContextMessage } threadContext { ...ContextMessage } channelContext { ...ContextMessage } truncatedBeforeSeq followUps { ...ContextMessage } trustSummary { lowest counts { trust count } } } } } ${ctxFields}`,
  run: `query Run($id: ID!) { run(id: $id) { ...RunFields answers { messageId clientMsgId } } } ${runFields}`,
  runState: `query RunState($id: ID!) { run(id: $id) { id state } }`,
  start: `mutation StartRun($id: ID!, $holder: String) { startRun(id: $id, holder: $holder) { ...RunFields answers { messageId clientMsgId } } } ${runFields}`,
  renew: `mutation RenewRun($id: ID!, $holder: String!) { renewRun(id: $id, holder: $holder) { ...RunFields } } ${runFields}`,
  ack: `mutation AckAgentEvents($upTo: String!) { ackAgentEvents(upTo: $upTo) { position } }`,
  finish: `mutation FinishRun($id: ID!, $input: RunFinish!, $holder: String) { finishRun(id: $id, input: $input, holder: $holder) { ...RunFields } } ${runFields}`,
  upload: `mutation UploadFile($file: Upload!) { uploadFile(file: $file) { id name mimeType size sha256 scanStatus createdAt } }`,
  fileText: `query FileText($id: ID!, $maxBytes: Int) { file(id: $id) { id name mimeType textStatus text(maxBytes: $maxBytes) } }`,
  capabilities: `query Capabilities { viewer { capabilities { filesOut } } }`,
  message: `mutation CreateMessage($threadId: ID!, $input: MessageCreate!, $holder: String) { createMessage(threadId: $threadId, input: $input, holder: $holder) { replayed message { id threadId threadSeq } } }`,
  live: `mutation UpdateRunLive($id: ID!, $holder: String, $input: RunLiveUpdate!) { updateRunLive(runId: $id, holder: $holder, input: $input) { runId version text status done } }`,
  runLive: `query RunLive($id: ID!) { run(id: $id) { live { runId version text status done } } }`,
  approve: `mutation RequestApproval($id: ID!, $holder: String, $input: ApprovalRequest!) { requestApproval(runId: $id, holder: $holder, input: $input) { id messageId state option { id label } } }`,
  approval: `query Approval($id: ID!) { approval(id: $id) { id messageId state option { id label } } }`,
};

/** The subscription of the stream over WebSocket. */
export const SUBSCRIPTION_AGENT_EVENTS = `subscription AgentEvents($after: String) { agentEvents(after: $after) { seq type createdAt payload } }`;

/** The input of an answer (`MessageCreate`). */
export interface MessageCreate {
  clientMsgId: string;
  contentMd: string;
  runId?: string;
  /** The lowest trust of what the model read in the run; it can only lower the answer's provenance. */
  inputTrust?: Trust;
  /** Files the message attaches (uploaded by the writer; an agent needs files_out); part of the clientMsgId's request. */
  attachmentFileIds?: string[];
}

/** An uploaded file's metadata, as uploadFile answers it. */
export interface UploadedFile {
  id: string;
  name: string;
  mimeType: string;
  size: number;
  sha256: string;
  scanStatus: string;
  createdAt: string;
}

/** An update of the live box (`RunLiveUpdate`). */
export interface LiveUpdate {
  baseVersion: number;
  append?: string;
  replace?: string;
  status?: string;
  done?: boolean;
}

/** An approval card to post (`ApprovalRequest`). */
export interface ApprovalRequest {
  title: string;
  detail?: string;
  options: ApprovalOption[];
  /** Seconds until the card expires (the server's default when absent). */
  expiresIn?: number;
}

function notFound(op: string): NotFoundError {
  return new NotFoundError(op, [{ message: "Not found", extensions: { code: "not_found", status: 404 } }], 200);
}

function codeForStatus(status: number): string {
  if (status === 401) return "unauthorized";
  if (status === 403) return "forbidden";
  if (status === 404) return "not_found";
  if (status === 413) return "payload_too_large";
  if (status === 429) return "rate_limited";
  if (status === 502 || status === 503 || status === 504) return "unavailable";
  if (status >= 500) return "internal_error";
  if (status >= 400) return "validation_failed";
  return "invalid_response";
}

function retryAfterMs(header: string | null, e: GraphQLErrorEntry | undefined): number {
  for (const s of [header ?? "", String(e?.extensions?.retryAfterSeconds ?? "")]) {
    const n = Number.parseInt(s.trim(), 10);
    if (n > 0) return n * 1000;
  }
  return 0;
}

/**
 * Speaks the public GraphQL API of a Bothy server with the agent's token.
 * Every method throws a {@link BothyError} (one of its subclasses for the
 * protocol's reasons) when the server refuses, a {@link NetworkError} when
 * no answer came, and an {@link AbortedError} when the caller's signal
 * ended the call.
 */
export class Client {
  /** The GraphQL URL the client posts to. */
  readonly endpoint: string;
  readonly #token: string;
  readonly #timeoutMs: number;
  readonly #userAgent: string;
  readonly #fetch: typeof fetch;

  /**
   * @param server the server's base URL (`https://chat.example.com`); one ending in `/graphql` is used as it is.
   * @param token the agent's token.
   * @throws Error when the URL is no absolute http(s) URL without credentials and query, or the token is empty or holds white space.
   */
  constructor(server: string, token: string, opts: ClientOptions = {}) {
    let u: URL;
    try {
      u = new URL(server.trim());
    } catch {
      throw new Error("bothy: the server URL must be an absolute http or https URL without credentials or query");
    }
    // Credentials in the URL would end up in error texts and logs; the
    // token travels only in the Authorization header.
    if ((u.protocol !== "http:" && u.protocol !== "https:") || u.username || u.password || u.search || u.hash) {
      throw new Error("bothy: the server URL must be an absolute http or https URL without credentials or query");
    }
    if (!token || /[\s\x00-\x20\x7f]/.test(token)) throw new Error("bothy: the token is empty or holds white space or control characters");
    let path = u.pathname.replace(/\/+$/, "");
    if (!path.endsWith("/graphql")) path += "/graphql";
    u.pathname = path;
    this.endpoint = u.toString();
    this.#token = token;
    this.#timeoutMs = opts.timeoutMs ?? 30_000;
    this.#userAgent = opts.userAgent ?? "bothy-agent-ts";
    this.#fetch = opts.fetch ?? fetch;
  }

  /** The token, for the WebSocket's connection_init. */
  get token(): string {
    return this.#token;
  }

  /**
   * Posts operation op with vars and returns its data.
   * @param extraMs time on top of the client's timeout (a long poll's wait).
   */
  async request<T>(op: string, query: string, vars: Record<string, unknown>, call: CallOptions = {}, extraMs = 0): Promise<T> {
    return this.#send<T>(op, JSON.stringify({ query, operationName: op, variables: vars }), { "Content-Type": "application/json" }, call, extraMs);
  }

  // send posts body (JSON, or a multipart form whose type fetch sets) as op
  // and returns the data, throwing as request says.
  async #send<T>(op: string, body: string | FormData, headers: Record<string, string>, call: CallOptions, extraMs: number): Promise<T> {
    const signals = [AbortSignal.timeout(this.#timeoutMs + extraMs)];
    if (call.signal) signals.push(call.signal);
    let resp: Response;
    let text: string;
    try {
      resp = await this.#fetch(this.endpoint, {
        method: "POST",
        headers: {
          ...headers,
          // graphql-response+json gives proper statuses for request errors.
          Accept: "application/graphql-response+json, application/json;q=0.9",
          Authorization: `Bearer ${this.#token}`,
          "User-Agent": this.#userAgent,
          ...traceHeaders(call.traceparent),
        },
        body,
        signal: AbortSignal.any(signals),
      });
      text = await resp.text();
    } catch (err) {
      if (call.signal?.aborted) throw new AbortedError(op);
      throw new NetworkError(op, err);
    }
    const retry = resp.headers.get("Retry-After");
    const statusError = (code: string, message: string) =>
      refusal(op, [{ message, extensions: { code, status: resp.status } }], resp.status, retryAfterMs(retry, undefined));
    const mt = (resp.headers.get("Content-Type") ?? "").split(";")[0]!.trim();
    if (mt !== "application/json" && mt !== "application/graphql-response+json") {
      // A proxy or load balancer answered, not the GraphQL endpoint.
      throw statusError(codeForStatus(resp.status), "the answer is no GraphQL document");
    }
    let env: { data?: unknown; errors?: GraphQLErrorEntry[] };
    try {
      env = JSON.parse(text);
    } catch {
      throw statusError(codeForStatus(resp.status), "the answer is no GraphQL document");
    }
    if (Array.isArray(env.errors) && env.errors.length > 0) {
      throw refusal(op, env.errors, resp.status, retryAfterMs(retry, env.errors[0]));
    }
    if (resp.status !== 200) throw statusError(codeForStatus(resp.status), "unexpected HTTP status");
    if (env.data == null) throw statusError("invalid_response", "the answer has neither data nor errors");
    return env.data as T;
  }

  /**
   * Uploads content as a file named name (the GraphQL multipart request
   * convention, with GraphQL-Require-Preflight: 1); the server sniffs the
   * media type. Never repeated: a repeat makes a second file.
   */
  async uploadFile(name: string, content: Uint8Array, call: CallOptions = {}): Promise<UploadedFile> {
    const form = new FormData();
    form.append("operations", JSON.stringify({ query: Q.upload, operationName: "UploadFile", variables: { file: null } }));
    form.append("map", '{"0":["variables.file"]}');
    form.append("0", new Blob([content], { type: "application/octet-stream" }), name.replace(/[\x00-\x1f\x7f"\\]/g, ""));
    const d = await this.#send<{ uploadFile: UploadedFile | null }>("UploadFile", form, { "GraphQL-Require-Preflight": "1" }, call, 0);
    if (!d.uploadFile) throw notFound("UploadFile");
    return d.uploadFile;
  }

  /**
   * A file's text (File.text), at most maxBytes of it (0: the server's
   * files.text_max_bytes); text is null unless textStatus is READY.
   * A {@link NotFoundError} for a missing file and for one the caller may not read.
   */
  async fileText(fileId: string, maxBytes = 0, call?: CallOptions): Promise<FileText> {
    const vars: Record<string, unknown> = { id: fileId };
    if (maxBytes > 0) vars.maxBytes = maxBytes;
    const d = await this.request<{ file: (Omit<FileText, "fileId"> & { id: string }) | null }>("FileText", Q.fileText, vars, call);
    if (!d.file) throw notFound("FileText");
    const { id, ...rest } = d.file;
    return { ...rest, fileId: id, text: rest.textStatus === "READY" ? rest.text : null };
  }

  /** Whether the token's principal holds the capability files_out. */
  async filesOut(call?: CallOptions): Promise<boolean> {
    const d = await this.request<{ viewer: { capabilities: { filesOut: boolean } } }>("Capabilities", Q.capabilities, {}, call);
    return d.viewer.capabilities.filesOut;
  }

  /** Who the token belongs to (`viewer`). */
  async viewer(call?: CallOptions): Promise<{ id: string; kind: string }> {
    return (await this.request<{ viewer: { id: string; kind: string } }>("Viewer", Q.viewer, {}, call)).viewer;
  }

  /** Long-polls the stream after a cursor; `""` continues after the acknowledged position. */
  async agentEvents(after: string, waitSeconds: number, call?: CallOptions): Promise<EventPage> {
    const vars: Record<string, unknown> = { wait: waitSeconds };
    if (after !== "") vars.after = after;
    const d = await this.request<{ agentEvents: EventPage }>("AgentEvents", Q.events, vars, call, waitSeconds * 1000);
    return { events: d.agentEvents.events.map(normalisePayload), nextAfter: d.agentEvents.nextAfter };
  }

  /** The run's context; a {@link NotFoundError} when the run is not active (or its person lost trigger). */
  async runContext(runId: string, call?: CallOptions): Promise<RunContext> {
    const d = await this.request<{ run: { context: RunContext } | null }>("RunContext", Q.context, { id: runId }, call);
    if (!d.run) throw notFound("RunContext");
    return d.run.context;
  }

  /** The run with its answers. */
  async run(runId: string, call?: CallOptions): Promise<RunInfo> {
    const d = await this.request<{ run: RunInfo | null }>("Run", Q.run, { id: runId }, call);
    if (!d.run) throw notFound("Run");
    return d.run;
  }

  /** Only the run's state. */
  async runState(runId: string, call?: CallOptions): Promise<string> {
    const d = await this.request<{ run: { id: string; state: string } | null }>("RunState", Q.runState, { id: runId }, call);
    if (!d.run) throw notFound("RunState");
    return d.run.state;
  }

  /** Claims the run for holder; the answer holds the run's answers. */
  async startRun(runId: string, holder: string, call?: CallOptions): Promise<RunInfo> {
    return (await this.request<{ startRun: RunInfo }>("StartRun", Q.start, { id: runId, holder: holder || null }, call)).startRun;
  }

  /** Renews holder's claim on the run. */
  async renewRun(runId: string, holder: string, call?: CallOptions): Promise<RunInfo> {
    return (await this.request<{ renewRun: RunInfo }>("RenewRun", Q.renew, { id: runId, holder }, call)).renewRun;
  }

  /** Acknowledges the stream up to a seq; answers the stored position. */
  async ackAgentEvents(upTo: string, call?: CallOptions): Promise<string> {
    return (await this.request<{ ackAgentEvents: { position: string } }>("AckAgentEvents", Q.ack, { upTo }, call)).ackAgentEvents.position;
  }

  /** Ends the run as holder. */
  async finishRun(runId: string, holder: string, outcome: Outcome, reason = "", call?: CallOptions): Promise<RunInfo> {
    const input: Record<string, unknown> = { outcome };
    if (reason) input.reason = reason;
    return (await this.request<{ finishRun: RunInfo }>("FinishRun", Q.finish, { id: runId, input, holder: holder || null }, call)).finishRun;
  }

  /** Posts a message into a thread; with `input.runId`, as the run's answer by holder. */
  async createMessage(threadId: string, holder: string, input: MessageCreate, call?: CallOptions): Promise<MessageResult> {
    const vars = { threadId, input, holder: holder || null };
    return (await this.request<{ createMessage: MessageResult }>("CreateMessage", Q.message, vars, call)).createMessage;
  }

  /** Writes into the run's live box. */
  async updateRunLive(runId: string, holder: string, u: LiveUpdate, call?: CallOptions): Promise<RunLive> {
    const input: Record<string, unknown> = { baseVersion: u.baseVersion };
    if (u.append) input.append = u.append;
    if (u.replace !== undefined) input.replace = u.replace;
    if (u.status !== undefined) input.status = u.status;
    if (u.done) input.done = true;
    const vars: Record<string, unknown> = { id: runId, input };
    if (holder) vars.holder = holder;
    return (await this.request<{ updateRunLive: RunLive }>("UpdateRunLive", Q.live, vars, call)).updateRunLive;
  }

  /** Reads the run's live box. */
  async runLive(runId: string, call?: CallOptions): Promise<RunLive> {
    const d = await this.request<{ run: { live: RunLive } | null }>("RunLive", Q.runLive, { id: runId }, call);
    if (!d.run) throw notFound("RunLive");
    return d.run.live;
  }

  /** Posts an approval card for the run's person. */
  async requestApproval(runId: string, holder: string, req: ApprovalRequest, call?: CallOptions): Promise<Approval> {
    const input: Record<string, unknown> = { title: req.title, options: req.options };
    if (req.detail) input.detail = req.detail;
    if (req.expiresIn && req.expiresIn > 0) input.expiresIn = req.expiresIn;
    const vars: Record<string, unknown> = { id: runId, input };
    if (holder) vars.holder = holder;
    return (await this.request<{ requestApproval: Approval }>("RequestApproval", Q.approve, vars, call)).requestApproval;
  }

  /** Reads an approval card. */
  async approval(id: string, call?: CallOptions): Promise<Approval> {
    const d = await this.request<{ approval: Approval | null }>("Approval", Q.approval, { id }, call);
    if (!d.approval) throw notFound("Approval");
    return d.approval;
  }
}

/** Payloads are JSON objects; a server that sends them as text is read the same. */
export function normalisePayload<E extends { payload: unknown }>(ev: E): E & { payload: Record<string, unknown> } {
  let p = ev.payload;
  if (typeof p === "string") {
    try {
      p = JSON.parse(p);
    } catch {
      p = {};
    }
  }
  return { ...ev, payload: (p && typeof p === "object" ? p : {}) as Record<string, unknown> };
}

