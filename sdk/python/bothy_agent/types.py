"""The data of a run as the server hands it to an agent (run_context.v1)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

UNVERIFIED = "UNVERIFIED"
SELF = "SELF"
SYSTEM = "SYSTEM"
AUTHORIZED = "AUTHORIZED"
TRIGGER = "TRIGGER"

_RANK = {SELF: 1, SYSTEM: 2, AUTHORIZED: 3, TRIGGER: 4}


def trust_rank(t: str | None) -> int:
    """The order of the trust levels: UNVERIFIED (and any unknown level) < SELF
    < SYSTEM < AUTHORIZED < TRIGGER."""
    return _RANK.get(t or "", 0)


def known_trust(t: str | None) -> str:
    """Returns t, or UNVERIFIED for a level this code does not know: trust is
    never derived or raised."""
    return t if trust_rank(t) else UNVERIFIED  # type: ignore[return-value]


def lower_trust(a: str | None, b: str | None) -> str:
    """The lower of two trust levels."""
    return known_trust(b) if trust_rank(b) < trust_rank(a) else known_trust(a)


def tools_allowed(t: str | None) -> bool:
    """Whether a consequential tool may run without asking at in-play trust t:
    only while everything read is the request of the person who asked, the
    agent's trustworthy words or a system line (AUTHORIZED is below the gate)."""
    return t in (TRIGGER, SELF, SYSTEM)


def parse_time(s: str) -> datetime:
    """Reads an RFC 3339 time as the server writes it (Go's, with one to nine
    digits of a second; Python 3.10's fromisoformat takes only three or six)."""
    s = re.sub(r"\.(\d+)", lambda m: "." + (m.group(1) + "000000")[:6], s.replace("Z", "+00:00"))
    return datetime.fromisoformat(s)


@dataclass
class Author:
    """The author of a context element."""

    id: str = ""
    kind: str = ""
    handle: str = ""
    display_name: str = ""


@dataclass
class Attachment:
    """A file attached to an element: its metadata only. Its text is data,
    read with Task.file_text (never part of the context)."""

    file_id: str
    name: str = ""
    mime_type: str = ""
    size: int = 0
    scan_status: str = ""
    text_status: str = ""

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Attachment:
        """Reads an attachment as the API writes it."""
        return cls(file_id=d.get("fileId") or "", name=d.get("name") or "", mime_type=d.get("mimeType") or "",
                   size=int(d.get("size") or 0), scan_status=d.get("scanStatus") or "", text_status=d.get("textStatus") or "")


@dataclass
class ContextMessage:
    """One element of a run's context, with the trust the server decided from
    live rights and the provenance of what it was derived from."""

    message_id: str
    content_md: str = ""
    thread_seq: int = 0
    author: Author = field(default_factory=Author)
    origin: str = ""
    kind: str = ""
    truncated: bool = False
    trust: str = UNVERIFIED
    provenance: str = ""
    already_delivered: bool = False
    attachments: list[Attachment] = field(default_factory=list)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ContextMessage:
        """Reads an element as the API writes it."""
        a = d.get("author") or {}
        return cls(message_id=d.get("messageId") or "", content_md=d.get("contentMd") or "",
                   thread_seq=int(d.get("threadSeq") or 0),
                   author=Author(a.get("id") or "", a.get("kind") or "", a.get("handle") or "", a.get("displayName") or ""),
                   origin=d.get("origin") or "", kind=d.get("kind") or "", truncated=bool(d.get("truncated")),
                   trust=d.get("trust") or UNVERIFIED, provenance=d.get("provenance") or "",
                   already_delivered=bool(d.get("alreadyDelivered")), attachments=[Attachment.from_json(x) for x in d.get("attachments") or []])

    def standing(self) -> str:
        """The lower of the element's trust and provenance: what it counts as."""
        if not self.provenance:
            return known_trust(self.trust)
        return lower_trust(self.trust, self.provenance)


@dataclass
class RunContext:
    """run_context.v1: the request, the thread and channel before it, the
    run's follow-ups and the least-trust summary (``lowest``)."""

    run_id: str
    trigger_message: ContextMessage
    thread_context: list[ContextMessage] = field(default_factory=list)
    channel_context: list[ContextMessage] | None = None
    follow_ups: list[ContextMessage] = field(default_factory=list)
    lowest: str = UNVERIFIED

    @classmethod
    def from_json(cls, run_id: str, d: dict[str, Any]) -> RunContext:
        """Reads a context as the API writes it."""
        cc = d.get("channelContext")
        summary = d.get("trustSummary") or {}
        return cls(run_id=d.get("runId") or run_id,
                   trigger_message=ContextMessage.from_json(d.get("triggerMessage") or {}),
                   thread_context=[ContextMessage.from_json(m) for m in d.get("threadContext") or []],
                   channel_context=None if cc is None else [ContextMessage.from_json(m) for m in cc],
                   follow_ups=[ContextMessage.from_json(m) for m in d.get("followUps") or []],
                   lowest=known_trust(summary.get("lowest")))

    def elements(self) -> list[ContextMessage]:
        """Every element: channel, thread, trigger, follow-ups."""
        return [*(self.channel_context or []), *self.thread_context, self.trigger_message, *self.follow_ups]


@dataclass
class Prompt:
    """A run's context rendered for a language model (docs/adapter.md#the-prompt-layout):
    the rules as ``system``, the context in fenced blocks as ``user``."""

    system: str
    user: str
    boundary: str
    lowest: str
    context: RunContext
