"""Answer keys (docs/adapter.md#answer-keys): one clientMsgId per request,
the same across retries, restarts and takeovers."""

from __future__ import annotations

from collections.abc import Iterable


def answer_key(run_id: str, message_id: str) -> str:
    """The clientMsgId of the answer to request message_id of run run_id."""
    return f"answer-{run_id}-{message_id}"


def requests_of(trigger: str, follow_ups: Iterable[str]) -> list[str]:
    """A run's requests: its trigger, then its follow-ups oldest first."""
    return [trigger, *follow_ups]


def answered_up_to(run_id: str, requests: list[str], keys: Iterable[str]) -> int:
    """How many of requests (a prefix) the answers under keys cover: an answer
    under a request's key covers it and every earlier one, and the key of
    older versions, ``answer-<run id>``, covers the trigger."""
    have = set(keys)
    n = 1 if requests and f"answer-{run_id}" in have else 0
    for i, r in enumerate(requests):
        if answer_key(run_id, r) in have:
            n = i + 1
    return n


def answered_beyond(run_id: str, requests: list[str], keys: Iterable[str]) -> bool:
    """Whether an answer of the run is keyed by a request after these (a later
    holder answered more than this reply covers)."""
    known = {answer_key(run_id, r) for r in requests}
    prefix = answer_key(run_id, "")
    return any(k.startswith(prefix) and k not in known for k in keys)


def request_stands(state: str, reason: str) -> bool:
    """Whether a run that ended in state with end reason still leaves its
    request standing, so that a late reply goes out without the run."""
    if state == "COMPLETED":
        return reason != "trigger_revoked"
    if state == "FAILED":
        return reason in ("timeout", "lease_expired")
    return False
