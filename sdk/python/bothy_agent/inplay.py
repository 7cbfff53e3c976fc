"""The in-play trust of a run (docs/adapter.md#provenance-and-the-in-play-trust):
the lowest trust of everything its model has read, which only goes down."""

from __future__ import annotations

import threading

from .types import AUTHORIZED, UNVERIFIED, ContextMessage, known_trust, lower_trust, tools_allowed, trust_rank

INPUT_CONTEXT = "with untrusted messages in the conversation"
INPUT_OTHERS = "with requests of other people in the conversation"
INPUT_OTHER = "after reading other untrusted input"
INPUT_FILE = "after reading an attached file"
INPUT_UNKNOWN = "with untrusted input in play"


class InPlay:
    """The in-play trust of one run, shared by its model calls and handler
    calls, with the untrusted inputs that lowered it (an approval card names
    them). Safe for use from several threads."""

    def __init__(self, lowest: str) -> None:
        self._mu = threading.Lock()
        self.level = known_trust(lowest)
        self._context = ""
        self._tools: list[str] = []
        self._other = False
        self._file = False
        self._others = False
        self._note_context(self.level)

    def get(self) -> str:
        """The current in-play trust."""
        with self._mu:
            return self.level

    def allowed(self) -> bool:
        """Whether a consequential tool may run without asking: the level is
        within the gate and no other person's request is in play."""
        with self._mu:
            return tools_allowed(self.level) and not self._others

    def lower_context(self, lowest: str) -> None:
        """Lowers the level by a context read again (a follow-up round)."""
        with self._mu:
            self.level = lower_trust(self.level, lowest)
            self._note_context(known_trust(lowest))

    def note_elements(self, elems: list[ContextMessage]) -> None:
        """Notes another person's request (an AUTHORIZED element) in play."""
        with self._mu:
            if any(m.standing() == AUTHORIZED for m in elems):
                self._others = True

    def lower_tool(self, name: str, trust: str) -> None:
        """Lowers the level by a tool's output the model reads next."""
        with self._mu:
            self.level = lower_trust(self.level, trust)
            if not tools_allowed(trust) and name not in self._tools:
                self._tools.append(name)

    def lower_other(self, trust: str) -> None:
        """Lowers the level by something a handler read itself."""
        with self._mu:
            self.level = lower_trust(self.level, trust)
            if not tools_allowed(trust):
                self._other = True

    def lower_file(self) -> None:
        """Lowers the level to UNVERIFIED: a file's text was read, which is data
        whoever uploaded the file."""
        with self._mu:
            self.level = UNVERIFIED
            self._file = True

    def inputs(self) -> list[str]:
        """The untrusted inputs in play, as an approval card names them."""
        with self._mu:
            out = []
            if self._context and self._context != AUTHORIZED:
                out.append(INPUT_CONTEXT)
            elif self._context == AUTHORIZED or self._others:
                out.append(INPUT_OTHERS)
            if self._tools:
                t = self._tools
                out.append("after reading the output of " + (t[0] if len(t) == 1 else ", ".join(t[:-1]) + " and " + t[-1]))
            if self._file:
                out.append(INPUT_FILE)
            if self._other:
                out.append(INPUT_OTHER)
            return out

    def _note_context(self, lowest: str) -> None:
        if tools_allowed(lowest):
            return
        if not self._context or trust_rank(lowest) < trust_rank(self._context):
            self._context = lowest
