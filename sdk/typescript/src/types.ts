/**
 * The shapes of the public GraphQL API that an adapter reads
 * (schema/*.graphqls), as plain objects.
 * @module
 */

/** The trust the server decided for an element of a run's context, from live rights. */
export type Trust = "TRIGGER" | "AUTHORIZED" | "SELF" | "SYSTEM" | "UNVERIFIED";

/** The trust levels, lowest first (`UNVERIFIED < SELF < SYSTEM < AUTHORIZED < TRIGGER`). */
export const TRUST_ORDER: readonly Trust[] = ["UNVERIFIED", "SELF", "SYSTEM", "AUTHORIZED", "TRIGGER"];

/** The states of a run; QUEUED, RUNNING and WAITING_INPUT are active. */
export type RunState = "QUEUED" | "RUNNING" | "WAITING_INPUT" | "COMPLETED" | "FAILED" | "CANCELLED";

/** Reports whether a run in this state can still be started, answered or finished. */
export function isActive(state: string): boolean {
  return state === "QUEUED" || state === "RUNNING" || state === "WAITING_INPUT";
}

/** How an adapter ends a run with finishRun. */
export type Outcome = "COMPLETED" | "FAILED" | "CANCELLED";

/** The author of a context element. */
export interface PrincipalRef {
  id: string;
  kind: string;
  handle: string;
  displayName: string;
}

/** An attachment of a context element. */
export interface Attachment {
  fileId: string;
  name: string;
  mimeType: string;
  size: number;
  scanStatus: string;
  transcript: string | null;
  /** Whether the file's text can be read (Task.fileText): PENDING, READY, UNSUPPORTED, TOO_LARGE or FAILED; absent from a server without files. */
  textStatus?: string;
}

/** One element of a run's context (`RunContextMessage`). */
export interface RunContextMessage {
  messageId: string;
  threadSeq: number;
  createdAt: string;
  channelId: string;
  author: PrincipalRef;
  role: string;
  origin: string;
  kind: string;
  contentMd: string;
  truncated: boolean;
  attachments: Attachment[] | null;
  replyToMessageId: string | null;
  trust: Trust;
  /** What the element was derived from; absent on older servers (then its trust counts). */
  provenance: Trust | null;
  alreadyDelivered: boolean;
}

/** The least-trust summary over every element of a context. */
export interface TrustSummary {
  lowest: Trust;
  counts: { trust: Trust; count: number }[];
}

/** A run's context (`run_context.v1`), recomputed by the server on every read. */
export interface RunContext {
  runId: string;
  contextFloorSeq: number;
  triggerMessage: RunContextMessage;
  threadContext: RunContextMessage[];
  channelContext: RunContextMessage[] | null;
  truncatedBeforeSeq: number | null;
  followUps: RunContextMessage[];
  trustSummary: TrustSummary | null;
}

/** Every element of a context in prompt order: channel, thread, trigger, follow-ups. */
export function elementsOf(rc: RunContext): RunContextMessage[] {
  return [...(rc.channelContext ?? []), ...rc.threadContext, rc.triggerMessage, ...rc.followUps];
}

/** An answer stored for a run (`Run.answers`). */
export interface RunAnswer {
  messageId: string;
  clientMsgId: string;
}

/** A run as startRun, renewRun, finishRun and run(id) give it. */
export interface RunInfo {
  id: string;
  threadId: string;
  state: RunState;
  triggeringMessageId: string | null;
  cancelRequested: boolean | null;
  endReason: string | null;
  attempt: number | null;
  holder: string | null;
  leaseExpiresAt: string | null;
  traceparent: string | null;
  answers?: RunAnswer[];
}

/** One event of the agent's stream. Payloads carry ids, never content. */
export interface AgentEvent {
  seq: string;
  type: string;
  createdAt?: string;
  payload: Record<string, unknown>;
}

/** A page of the stream and the cursor after it. */
export interface EventPage {
  events: AgentEvent[];
  nextAfter: string;
}

/** The event types an adapter acts on. */
export const EventType = {
  Invocation: "agent.invocation",
  Followup: "agent.followup",
  CancelRequested: "run.cancel_requested",
  ApprovalDecided: "agent.approval_decided",
} as const;

/** The payload of an `agent.invocation` event. */
export interface Invocation {
  run_id: string;
  thread_id: string;
  channel_id?: string;
  message_id?: string;
  session?: { id?: string; mode?: string };
  attempt?: number;
  traceparent?: string;
}

/** What createMessage answers. */
export interface MessageResult {
  replayed: boolean;
  message: { id: string; threadId: string; threadSeq: number };
}

/** The run's live box. */
export interface RunLive {
  runId: string;
  version: number;
  text: string;
  status: string | null;
  done: boolean;
}

/** One option of an approval card. */
export interface ApprovalOption {
  id: string;
  label: string;
}

/** An approval card of a run and how it was answered. */
export interface Approval {
  id: string;
  messageId: string;
  /** PENDING, DECIDED or EXPIRED. */
  state: string;
  option: ApprovalOption | null;
}
