"""bothy_agent: write Bothy agents in Python.

:func:`run` follows the agent's stream and calls a handler with each run's
:class:`Task`; the SDK keeps the run contract (docs/adapter.md): the context
before the claim, holders and lease renewals, fencing, acknowledgements only
after handling, follow-up rounds, answer keys, the outbox, the live box,
cancels, and the gate in front of consequential tools.
"""

from .adapter import Adapter, Config, FailRun, Handler, Task, arun, new_holder, run
from .answers import answer_key
from .client import HOLDER_HEADER, Client, holder_headers
from .errors import (AlreadyDecided, ApprovalPending, BothyError, Conflict, Forbidden, IdempotencyKeyReused, LiveVersion,
                     NetworkError, NoApprover, NotApproved, NotFound, RunClaimed, RunNotActive, RunNotStarted,
                     TriggerRevoked, Unauthorized)
from .files import FileText, NoFilesOut, attach_file_tool
from .httptool import ToolsFileError
from .httptool import load as load_tools
from .model import AnthropicModel, BadAnswer, ModelConfig, OpenAIModel, model_from_env
from .render import file_text_block, new_boundary, render, with_file_texts, with_follow_ups
from .tools import OPTION_APPROVE, OPTION_DENY, Tool, ask, current_task, run_tool
from .types import (AUTHORIZED, SELF, SYSTEM, TRIGGER, UNVERIFIED, ContextMessage, Prompt, RunContext, tools_allowed)
from .ws import NoWebSocket

__all__ = [
    "AUTHORIZED", "Adapter", "AlreadyDecided", "AnthropicModel", "ApprovalPending", "BadAnswer", "BothyError",
    "Client", "Config", "Conflict", "ContextMessage", "FailRun", "Forbidden", "HOLDER_HEADER", "Handler",
    "IdempotencyKeyReused", "LiveVersion", "ModelConfig", "NetworkError", "NoApprover", "NoWebSocket",
    "NotApproved", "NotFound", "OPTION_APPROVE", "OPTION_DENY", "OpenAIModel", "Prompt", "RunClaimed", "RunContext",
    "RunNotActive", "RunNotStarted", "SELF", "SYSTEM", "TRIGGER", "Task", "Tool", "ToolsFileError",
    "TriggerRevoked", "UNVERIFIED", "Unauthorized", "answer_key", "arun", "ask", "current_task", "holder_headers",
    "load_tools", "model_from_env", "new_boundary", "new_holder", "render", "run", "run_tool", "tools_allowed",
    "tools_from_env", "with_file_texts", "with_follow_ups", "file_text_block", "FileText", "NoFilesOut",
    "attach_file_tool",
]


def tools_from_env() -> list[Tool]:
    """The HTTP tools of the file ``BOTHY_TOOLS`` names (none when it is unset)."""
    import os

    path = os.environ.get("BOTHY_TOOLS", "")
    return load_tools(path) if path else []
