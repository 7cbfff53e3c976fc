"""The acknowledgement ledger (docs/adapter.md#acknowledging-the-stream).

Acknowledging a seq acknowledges every event up to it, and acknowledging an
``agent.followup`` delivers its follow-up: the promise that the run's answer
covers it. So the position only moves over a prefix of events that are
dealt with, and stops in front of a follow-up the run's model has not seen.
A follow-up is dealt with when the model of the run this process holds saw
it (or an answer of the run covers it), when its run ended, or, for a run
this process does not hold, when the stored position passed it or a read
shows the run ended. Everything here runs on one event loop.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field


def parse_seq(s: str) -> int | None:
    """A seq as the server writes it (a decimal position), or None."""
    try:
        return int(s)
    except (TypeError, ValueError):
        return None


@dataclass
class Entry:
    """One event read from the stream."""

    seq: str
    resolved: bool
    followup: bool = False
    run_id: str = ""
    message: str = ""
    since: float = 0.0


@dataclass
class _RunAcks:
    covered: set[str] = field(default_factory=set)
    delivered: set[str] = field(default_factory=set)


class Ledger:
    """What has been read, what is dealt with and how far the stream may be
    acknowledged."""

    def __init__(self) -> None:
        self.pending: list[Entry] = []
        self.stored: int | None = None
        self.last_acked = ""
        self.runs: dict[str, _RunAcks] = {}
        self.kick = asyncio.Event()
        self._changed = asyncio.Event()

    def track(self, run_id: str) -> None:
        """Starts the record of a run this process now holds."""
        self.runs.setdefault(run_id, _RunAcks())

    def add(self, seq: str, typ: str, dealt: bool, run_id: str = "", message_id: str = "") -> None:
        """Records an event the loop handled. dealt is False for an event this
        process leaves to a later one: nothing from it on is acknowledged."""
        e = Entry(seq=seq, resolved=dealt, since=time.monotonic())
        if dealt and typ == "agent.followup" and run_id and message_id:
            e.followup, e.run_id, e.message, e.resolved = True, run_id, message_id, False
            r = self.runs.get(run_id)
            if r and message_id in r.covered:
                e.resolved = True
            n = parse_seq(seq)
            if self.stored is not None and n is not None and n <= self.stored:
                # Another process acknowledged it already: it is delivered.
                e.resolved = True
                self._note_delivered(e)
        self.pending.append(e)

    def cover(self, run_id: str, message_ids: list[str]) -> None:
        """Records that run_id's answer covers these follow-ups (its model saw them)."""
        r = self.runs.get(run_id)
        if r is not None:
            r.covered.update(message_ids)
            for e in self.pending:
                if e.followup and e.run_id == run_id and e.message in r.covered:
                    e.resolved = True
        self.kick.set()

    def release(self, run_id: str, ended: bool) -> None:
        """Ends the record of a run this process no longer holds; when it ended,
        its follow-ups' events are dealt with (the server settled them)."""
        self.runs.pop(run_id, None)
        if ended:
            self._resolve_run(run_id)
        self.kick.set()

    def run_ended(self, run_id: str) -> None:
        """Resolves the follow-ups of a run this process does not hold once a
        read showed it ended."""
        if run_id not in self.runs:
            self._resolve_run(run_id)

    def _resolve_run(self, run_id: str) -> None:
        for e in self.pending:
            if e.followup and e.run_id == run_id:
                e.resolved = True

    def target(self) -> str:
        """The position to acknowledge: the last event of the longest prefix of
        dealt-with events ("" when the first is not)."""
        seq = ""
        for e in self.pending:
            if not e.resolved:
                break
            seq = e.seq
        return seq

    def head(self, interval: float) -> tuple[Entry | None, bool]:
        """The first event not dealt with, and whether it is the follow-up of a
        run this process does not hold that is due for a check (every
        interval seconds; the check is marked done)."""
        now = time.monotonic()
        for e in self.pending:
            if e.resolved:
                continue
            if e.followup and e.run_id not in self.runs and now - e.since >= interval:
                e.since = now
                return e, True
            return e, False
        return None, False

    def acked(self, up_to: str, position: str) -> None:
        """Records an acknowledgement up to up_to that the server answered with
        position: those events leave the ledger, and so do those the stored
        position passed (another process acknowledged them)."""
        self.last_acked = up_to
        n = parse_seq(position)
        if n is not None and (self.stored is None or n > self.stored):
            self.stored = n
        cut = 0
        for i, e in enumerate(self.pending):
            if e.seq == up_to:
                cut = i + 1
                break
        for i, e in enumerate(self.pending):
            en = parse_seq(e.seq)
            passed = self.stored is not None and en is not None and en <= self.stored
            if i > cut or (i == cut and not passed):
                break
            self._note_delivered(e)
            cut = max(cut, i + 1)
        self.pending = self.pending[cut:]
        self._changed.set()
        self._changed = asyncio.Event()

    def _note_delivered(self, e: Entry) -> None:
        if e.followup and (r := self.runs.get(e.run_id)) is not None:
            r.delivered.add(e.message)

    def delivered(self, run_id: str, message_ids: list[str]) -> bool:
        """Whether an acknowledgement delivered every one of these follow-ups."""
        r = self.runs.get(run_id)
        return r is None or all(m in r.delivered for m in message_ids)

    async def await_delivered(self, run_id: str, message_ids: list[str]) -> None:
        """Waits until the follow-ups message_ids of run_id are delivered."""
        while not self.delivered(run_id, message_ids):
            changed = self._changed
            self.kick.set()
            await changed.wait()
