"""Tools a model may call, and the gate in front of the consequential ones
(docs/adapter.md#approvals-and-the-tool-gate)."""

from __future__ import annotations

import asyncio
import contextvars
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .errors import NoApprover, NotApproved
from .inplay import INPUT_UNKNOWN
from .types import UNVERIFIED

if TYPE_CHECKING:
    from .adapter import Task

OPTION_APPROVE = "approve"
OPTION_DENY = "deny"
#: How often a waiting ask() reads its approval besides the stream's events.
APPROVAL_POLL = 5.0

_task_var: contextvars.ContextVar[Task | None] = contextvars.ContextVar("bothy_task", default=None)


def current_task() -> Task | None:
    """The Task of the run whose model or handler is calling (None outside a run)."""
    return _task_var.get()


def use_task(task: Task) -> contextvars.Token:
    """Makes task the current one (what the SDK does for every model call of a
    run; code that calls a backend on its own does it to keep the gate)."""
    return _task_var.set(task)


@dataclass
class Tool:
    """A function a model may call.

    ``consequential`` marks effects outside the conversation (filing a
    ticket, sending mail): such a tool runs without asking only while the
    run's in-play trust is within the gate. ``output_trust`` is how far what
    it returns may be trusted (UNVERIFIED unless declared SYSTEM); the model
    reads it, so it lowers the in-play trust. ``call`` takes the model's
    arguments (a JSON object) and returns what the model reads back.
    """

    name: str
    description: str = ""
    parameters: dict[str, Any] = field(default_factory=lambda: {"type": "object"})
    consequential: bool = False
    output_trust: str = UNVERIFIED
    call: Callable[[dict[str, Any]], Awaitable[str]] | None = None


@dataclass
class Approver:
    """Asks the person of one run and receives the decisions the stream
    brings (``agent.approval_decided``)."""

    client: Any
    run_id: str
    holder: str
    waiting: dict[str, asyncio.Future] = field(default_factory=dict)

    def decided(self, approval_id: str, state: str, option_id: str) -> None:
        """Hands a decision to the ask() waiting for it."""
        f = self.waiting.get(approval_id)
        if f is not None and not f.done():
            f.set_result(option_id if state.upper() == "DECIDED" else "")

    async def ask(self, title: str, detail: str = "", options: list[dict[str, str]] | None = None,
                  expires_in: int = 0) -> str:
        """Posts an approval card and waits for the person's answer: the option
        chosen, or "" when the approval expired or was withdrawn."""
        opts = options or [{"id": OPTION_APPROVE, "label": "Approve"}, {"id": OPTION_DENY, "label": "Deny"}]
        ap = await self.client.request_approval(self.run_id, self.holder, title, detail, opts, expires_in)
        fut: asyncio.Future = asyncio.get_running_loop().create_future()
        self.waiting[ap["id"]] = fut
        try:
            while True:
                try:
                    return await asyncio.wait_for(asyncio.shield(fut), APPROVAL_POLL)
                except asyncio.TimeoutError:
                    cur = await self.client.approval(ap["id"])
                    if cur.get("state") != "PENDING":
                        return (cur.get("option") or {}).get("id", "") if cur.get("state") == "DECIDED" else ""
        finally:
            self.waiting.pop(ap["id"], None)


async def ask(title: str, detail: str = "", options: list[dict[str, str]] | None = None, expires_in: int = 0) -> str:
    """Asks the person who triggered the current run (an approval card) and
    waits: the option id chosen, or "" when the approval expired. The run
    waits meanwhile with its lease kept. Raises NoApprover outside a run."""
    t = current_task()
    if t is None or t._approver is None:
        raise NoApprover("no run to ask an approval for")
    return await t._approver.ask(title, detail, options, expires_in)


def _cut(s: str, n: int) -> str:
    b = s.encode()
    return s if len(b) <= n else b[:n].decode(errors="ignore")


async def run_tool(tool: Tool, args: dict[str, Any]) -> str:
    """Runs tool for the current run's model behind the gate: a read-only tool
    runs; a consequential one runs at once only while the in-play trust
    allows it, otherwise only after the person who asked approved this call.
    What it returns lowers the in-play trust by its output_trust.

    Raises NotApproved (with the model's text) when the person did not
    approve, NoApprover outside a run, or the tool's own error.
    """
    if tool.call is None:
        raise ValueError(f"tool {tool.name} cannot be called")
    t = current_task()
    if tool.consequential and (t is None or not t._play.allowed()):
        why = ", ".join(t._play.inputs()) if t is not None and t._play.inputs() else INPUT_UNKNOWN
        detail = _cut(f"The agent wants to call {tool.name} {why}. Arguments:\n{json.dumps(args)}", 8000)
        opt = await ask(_cut(f"Run {tool.name}?", 200), detail)
        if opt != OPTION_APPROVE:
            raise NotApproved(f"The person who asked did not approve {tool.name}; it was not run.")
    try:
        return await tool.call(args)
    finally:
        # Lowered even when the call failed: lowering too far only costs a question.
        if t is not None:
            t._play.lower_tool(tool.name, tool.output_trust)
