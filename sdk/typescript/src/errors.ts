/**
 * The errors of the SDK. A refusal of the server is a {@link BothyError}
 * carrying the code and reason of the GraphQL error's extensions (the
 * vocabulary of the REST problems); the protocol's reasons that an adapter
 * acts on have classes of their own, so that `instanceof` tells them apart.
 * @module
 */

/** One entry of a GraphQL error's `extensions.fieldErrors`. */
export interface FieldError {
  field: string;
  pointer?: string;
  code: string;
  detail?: string;
}

/** The extensions Bothy puts on every GraphQL error. */
export interface ErrorExtensions {
  code?: string;
  reason?: string;
  status?: number;
  fieldErrors?: FieldError[];
  retryAfterSeconds?: number;
  /** The live box's version of a `live_version` conflict. */
  currentVersion?: number;
}

/** One entry of a GraphQL response's `errors`. */
export interface GraphQLErrorEntry {
  message: string;
  path?: (string | number)[];
  extensions?: ErrorExtensions;
}

/**
 * A refused call: the server answered GraphQL errors, or an HTTP status
 * without a usable GraphQL answer. Bothy's error messages carry no content,
 * so the message is safe to log.
 */
export class BothyError extends Error {
  /** The operation name, such as `StartRun`. */
  readonly op: string;
  /** `extensions.code` of the first error (`conflict`, `not_found`, ...). */
  readonly code: string;
  /** `extensions.reason` of the first error, `""` when absent. */
  readonly reason: string;
  /** `extensions.status`, else the HTTP status. */
  readonly status: number;
  /** Milliseconds the server asked to wait (Retry-After), 0 when absent. */
  readonly retryAfterMs: number;
  /** Every error of the answer. */
  readonly errors: GraphQLErrorEntry[];

  constructor(op: string, errors: GraphQLErrorEntry[], httpStatus: number, retryAfterMs = 0) {
    const first = errors[0] ?? { message: "refused" };
    const ext = first.extensions ?? {};
    const code = ext.code ?? "invalid_response";
    const reason = ext.reason ?? "";
    const status = ext.status ?? httpStatus;
    super(`bothy: ${op} refused: ${code}${reason ? ` (${reason})` : ""}, status ${status}: ${first.message}`);
    this.name = new.target.name;
    this.op = op;
    this.code = code;
    this.reason = reason;
    this.status = status;
    this.retryAfterMs = retryAfterMs;
    this.errors = errors;
  }
}

/** Another holder claims the run (`conflict` `run_claimed`): stop, post nothing. */
export class RunClaimedError extends BothyError {}
/** The run has ended (`conflict` `run_not_active`): read it and decide by how it ended. */
export class RunNotActiveError extends BothyError {}
/** The run's person lost trigger (`conflict` `trigger_revoked`): drop the reply, confirm the cancel. */
export class TriggerRevokedError extends BothyError {}
/** The answer key holds another text (`conflict` `idempotency_key_reused`): the request has an answer. */
export class IdempotencyKeyReusedError extends BothyError {}
/** The live box moved on (`conflict` `live_version`); {@link BothyError.errors} name the current version. */
export class LiveVersionError extends BothyError {}
/** The object is unknown or no longer visible (`not_found`); a run context that is gone means the run ended. */
export class NotFoundError extends BothyError {}
/** The token does not authenticate (`unauthorized`). */
export class UnauthorizedError extends BothyError {}
/** The token may not do this (`forbidden`). */
export class ForbiddenError extends BothyError {}
/** Too many calls (`rate_limited`); {@link BothyError.retryAfterMs} says how long to wait. */
export class RateLimitedError extends BothyError {}
/** The server or its database is away for a moment (`unavailable`, `internal_error`). */
export class UnavailableError extends BothyError {}
/** The input was refused (`validation_failed`, `invalid_cursor`, ...). */
export class ValidationError extends BothyError {}

const byReason: Record<string, typeof BothyError> = {
  run_claimed: RunClaimedError,
  run_not_active: RunNotActiveError,
  trigger_revoked: TriggerRevokedError,
  idempotency_key_reused: IdempotencyKeyReusedError,
  live_version: LiveVersionError,
};

const byCode: Record<string, typeof BothyError> = {
  not_found: NotFoundError,
  unauthorized: UnauthorizedError,
  forbidden: ForbiddenError,
  rate_limited: RateLimitedError,
  unavailable: UnavailableError,
  internal_error: UnavailableError,
  validation_failed: ValidationError,
  invalid_cursor: ValidationError,
};

/**
 * Returns the error class for a refusal: by its reason first (the
 * protocol's conflicts), then by its code.
 */
export function refusal(op: string, errors: GraphQLErrorEntry[], httpStatus: number, retryAfterMs = 0): BothyError {
  const ext = errors[0]?.extensions ?? {};
  const Cls = byReason[ext.reason ?? ""] ?? byCode[ext.code ?? ""] ?? BothyError;
  return new Cls(op, errors, httpStatus, retryAfterMs);
}

/** A call that got no answer: a network failure or the call's own timeout. Repeating it may succeed. */
export class NetworkError extends Error {
  readonly op: string;
  constructor(op: string, cause: unknown) {
    super(`bothy: ${op}: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
    this.name = "NetworkError";
    this.op = op;
  }
}

/** The caller gave up: the signal passed to a call was aborted. Not temporary. */
export class AbortedError extends Error {
  constructor(op: string) {
    super(`bothy: ${op}: aborted`);
    this.name = "AbortedError";
  }
}

/**
 * Reports whether repeating a call may succeed: a network failure, a
 * timeout of the call itself, `rate_limited`, `unavailable` or
 * `internal_error`. Only idempotent calls are repeated.
 */
export function isTemporary(err: unknown): boolean {
  if (err instanceof NetworkError) return true;
  if (err instanceof BothyError) return err.code === "rate_limited" || err.code === "unavailable" || err.code === "internal_error";
  return false;
}

/** The code of a {@link BothyError}, `""` for any other error. */
export function errorCode(err: unknown): string {
  return err instanceof BothyError ? err.code : "";
}

/** The reason of a {@link BothyError}, `""` for any other error. */
export function errorReason(err: unknown): string {
  return err instanceof BothyError ? err.reason : "";
}

/** The person who asked did not approve a consequential tool call; the model reads that it was not run. */
export class NotApprovedError extends Error {
  /** What the model reads back instead of the tool's output. */
  readonly text: string;
  constructor(tool: string) {
    super("bothy: the person who asked did not approve the call");
    this.name = "NotApprovedError";
    this.text = `The person who asked did not approve ${tool}; it was not run.`;
  }
}

/** An approval was asked for outside a run: nobody could answer it. */
export class NoApproverError extends Error {
  constructor() {
    super("bothy: no run to ask an approval for");
    this.name = "NoApproverError";
  }
}

/** The handler failed the run on purpose ({@link Task.fail}); the run ends FAILED with the reason. */
export class FailError extends Error {
  readonly reason: string;
  constructor(reason: string) {
    super(`bothy: the handler failed the run: ${reason}`);
    this.name = "FailError";
    this.reason = reason;
  }
}

/** The model server answered an error status (after the backend's retries). */
export class ModelHTTPError extends Error {
  readonly status: number;
  constructor(status: number, options?: ErrorOptions) {
    super(`bothy: the model answered status ${status}`, options);
    this.name = "ModelHTTPError";
    this.status = status;
  }
}

/** The model's answer was empty or no completion. */
export class BadModelAnswerError extends Error {
  constructor(detail: string) {
    super(`bothy: bad model answer: ${detail}`);
    this.name = "BadModelAnswerError";
  }
}

/**
 * The kind of a failure for logs (`error_kind`), never the model server's
 * words: model_timeout, model_refused, model_unavailable,
 * bad_model_answer, server_refused, network, cancelled or handler.
 */
export function errorKind(err: unknown): string {
  if (err instanceof ModelHTTPError) return err.status === 429 || err.status >= 500 ? "model_unavailable" : "model_refused";
  if (err instanceof BadModelAnswerError) return "bad_model_answer";
  if (err instanceof BothyError) return "server_refused";
  if (err instanceof NetworkError) return "network";
  if (err instanceof AbortedError) return "cancelled";
  if (err instanceof Error && (err.name === "AbortError" || err.name === "APIUserAbortError")) return "cancelled";
  if (err instanceof Error && (err.name === "TimeoutError" || err.name === "APIConnectionTimeoutError")) return "model_timeout";
  return "handler";
}
