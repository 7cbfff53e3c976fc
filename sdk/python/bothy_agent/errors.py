"""Errors of the Bothy API, one class per reason of the protocol.

The server refuses a call with a code (``conflict``, ``not_found``, ...) and,
for conflicts, a reason (``run_claimed``, ``run_not_active``, ...). The SDK
raises the class of the reason when it has one, else the class of the code,
so that ``except RunClaimed`` reads like the protocol (docs/adapter.md).
"""

from __future__ import annotations


class BothyError(Exception):
    """A refusal of the Bothy server.

    ``code`` is the error code (``conflict``, ``unavailable``, ...), ``reason``
    the protocol's reason when the server gave one, ``status`` the HTTP status
    and ``retry_after`` the seconds the server asked to wait (0 when none).
    """

    def __init__(self, op: str, message: str, code: str = "", reason: str = "", status: int = 0,
                 retry_after: float = 0.0, extensions: dict | None = None) -> None:
        super().__init__(f"bothy: {op}: {message} ({code}{'/' + reason if reason else ''})")
        self.op = op
        self.code = code
        self.reason = reason
        self.status = status
        self.retry_after = retry_after
        self.extensions = extensions or {}

    @property
    def temporary(self) -> bool:
        """Whether repeating the same idempotent call may succeed."""
        return self.code in ("rate_limited", "unavailable", "internal_error")


class NetworkError(BothyError):
    """A call that got no answer: a network failure or a timeout. Temporary."""

    def __init__(self, op: str, message: str) -> None:
        super().__init__(op, message, code="network")

    @property
    def temporary(self) -> bool:
        """Always: the same call may get through."""
        return True


class Unauthorized(BothyError):
    """The token does not authenticate (code ``unauthorized``)."""


class Forbidden(BothyError):
    """The principal may not do this (code ``forbidden``)."""


class NotFound(BothyError):
    """The object does not exist or may not be read (code ``not_found``); a
    run's context answers it once the run ended or its person lost trigger."""


class Conflict(BothyError):
    """A conflict whose reason has no class of its own."""


class RunClaimed(Conflict):
    """Another holder holds the run: stop working on it (``run_claimed``)."""


class RunNotActive(Conflict):
    """The run ended (``run_not_active``): read it to decide about a reply."""


class RunNotStarted(Conflict):
    """The run was not started yet (``run_not_started``)."""


class TriggerRevoked(Conflict):
    """The person who asked lost trigger (``trigger_revoked``): drop the reply
    and confirm the cancel."""


class IdempotencyKeyReused(Conflict):
    """The clientMsgId holds another message (``idempotency_key_reused``): the
    request has an answer already."""


class LiveVersion(Conflict):
    """The live box moved on (``live_version``); ``extensions['currentVersion']``
    names its version."""


class ApprovalPending(Conflict):
    """The run waits for another approval already (``approval_pending``)."""


class AlreadyDecided(Conflict):
    """The approval was decided already (``already_decided``)."""


class NotApproved(Exception):
    """The person who asked did not approve a consequential tool call (denied,
    expired or withdrawn): the tool did not run. ``text`` is what the model
    reads back."""

    def __init__(self, text: str) -> None:
        super().__init__("the person who asked did not approve the call")
        self.text = text


class NoApprover(Exception):
    """An approval was asked for outside a run the SDK drives."""


_BY_REASON: dict[str, type[BothyError]] = {
    "run_claimed": RunClaimed,
    "run_not_active": RunNotActive,
    "run_not_started": RunNotStarted,
    "trigger_revoked": TriggerRevoked,
    "idempotency_key_reused": IdempotencyKeyReused,
    "live_version": LiveVersion,
    "approval_pending": ApprovalPending,
    "already_decided": AlreadyDecided,
}

_BY_CODE: dict[str, type[BothyError]] = {
    "unauthorized": Unauthorized,
    "forbidden": Forbidden,
    "not_found": NotFound,
    "conflict": Conflict,
}


def error_for(op: str, message: str, code: str, reason: str = "", status: int = 0,
              retry_after: float = 0.0, extensions: dict | None = None) -> BothyError:
    """Returns the exception of the protocol's reason (or code) for a refusal."""
    cls = _BY_REASON.get(reason) or _BY_CODE.get(code) or BothyError
    return cls(op, message, code=code, reason=reason, status=status, retry_after=retry_after, extensions=extensions)


def code_for_status(status: int) -> str:
    """Maps an HTTP status to the code vocabulary of the API's problems."""
    if status == 401:
        return "unauthorized"
    if status == 403:
        return "forbidden"
    if status == 404:
        return "not_found"
    if status == 413:
        return "payload_too_large"
    if status == 429:
        return "rate_limited"
    if status in (502, 503, 504):
        return "unavailable"
    if status >= 500:
        return "internal_error"
    if status >= 400:
        return "validation_failed"
    return "invalid_response"
