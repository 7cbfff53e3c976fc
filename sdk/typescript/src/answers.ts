/**
 * Answer keys (docs/adapter.md, answer keys): every answer's clientMsgId
 * names the run and the request it answers, so that a retry, a restart
 * and a takeover send the same key and the server stores one message.
 * @module
 */
import type { RunAnswer, RunContextMessage } from "./types.js";

/** The clientMsgId of the answer to request messageId of run runId: `answer-<run>-<message>`. */
export function answerKey(runId: string, messageId: string): string {
  return `answer-${runId}-${messageId}`;
}

// The key of older versions, read as the trigger's answer.
function legacyAnswerKey(runId: string): string {
  return `answer-${runId}`;
}

/** A run's requests: its trigger, then its follow-ups in play, oldest first. */
export function requestsOf(trigger: string, followUps: Pick<RunContextMessage, "messageId">[]): string[] {
  return [trigger, ...followUps.map((f) => f.messageId)];
}

/**
 * How many of requests (in order) the answers cover: an answer under a
 * request's key covers it and every earlier one.
 */
export function answeredUpTo(runId: string, requests: string[], answers: RunAnswer[] | undefined): number {
  const keys = new Set((answers ?? []).map((a) => a.clientMsgId));
  let n = keys.has(legacyAnswerKey(runId)) && requests.length > 0 ? 1 : 0;
  requests.forEach((id, i) => {
    if (keys.has(answerKey(runId, id))) n = i + 1;
  });
  return n;
}

/** Whether an answer of the run covers a request not among requests (a later follow-up): it covers them all. */
export function answeredBeyond(runId: string, requests: string[], answers: RunAnswer[] | undefined): boolean {
  const known = new Set(requests.map((id) => answerKey(runId, id)));
  const prefix = answerKey(runId, "");
  return (answers ?? []).some((a) => a.clientMsgId.startsWith(prefix) && !known.has(a.clientMsgId));
}

/**
 * Whether a reply still stands after its run ended in state with reason
 * (docs/adapter.md, when the run ended first): a COMPLETED run (not by
 * trigger_revoked) and a run the server gave up (FAILED timeout or
 * lease_expired) leave it standing; every other ending took it away.
 */
export function requestStands(state: string, reason: string | null | undefined): boolean {
  if (state === "COMPLETED") return reason !== "trigger_revoked";
  if (state === "FAILED") return reason === "timeout" || reason === "lease_expired";
  return false;
}
