"""Model backends on the providers' official libraries: :class:`OpenAIModel`
(OpenAI and every compatible server, extra ``[openai]``) and
:class:`AnthropicModel` (extra ``[anthropic]``). Both take a rendered
:class:`~bothy_agent.types.Prompt`, stream into the run's live box when asked
to, and run the model's tool calls behind the gate (:func:`~bothy_agent.tools.run_tool`)."""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass, field
from typing import Any

from .errors import NoApprover, NotApproved
from .tools import Tool, current_task, run_tool, use_task
from .types import Prompt

log = logging.getLogger("bothy_agent")

#: The note appended when the model stopped at its token limit.
CUT_NOTE = "\n\n(The answer was cut off at the model's length limit.)"
#: How many rounds of tool calls one answer may take.
MAX_TOOL_ROUNDS = 8


@dataclass
class ModelConfig:
    """Where the model is and what it is: ``base_url``, ``api_key`` ("" sends
    no key), ``model`` (the name), ``stream`` (stream the answer, into the live
    box with Config.live), ``tools``, ``max_tokens`` (None: the server's), and
    ``timeout`` (seconds for the whole answer) and ``max_attempts`` (tries on
    429, 5xx and network errors, after Retry-After)."""

    base_url: str = ""
    api_key: str = ""
    model: str = ""
    stream: bool = False
    tools: list[Tool] = field(default_factory=list)
    max_tokens: int | None = None
    timeout: float = 120.0
    max_attempts: int = 4

    @classmethod
    def from_env(cls, **kw: Any) -> ModelConfig:
        """A ModelConfig from ``BOTHY_MODEL_BASE_URL``, ``BOTHY_MODEL_API_KEY``
        and ``BOTHY_MODEL_NAME``, with kw set on it."""
        kw.setdefault("base_url", os.environ.get("BOTHY_MODEL_BASE_URL", ""))
        kw.setdefault("api_key", os.environ.get("BOTHY_MODEL_API_KEY", ""))
        kw.setdefault("model", os.environ.get("BOTHY_MODEL_NAME", ""))
        return cls(**kw)


class BadAnswer(Exception):
    """The model's answer is no usable completion (no choices, no text)."""


async def _call_tool(tools: dict[str, Tool], name: str, raw: str) -> str:
    """Runs one call of the model through the gate; returns what the model reads."""
    tool = tools.get(name)
    if tool is None:
        return f"There is no tool {name}."
    try:
        args = json.loads(raw or "{}")
    except ValueError:
        return "The arguments are no JSON object."
    try:
        out = await run_tool(tool, args if isinstance(args, dict) else {})
        log.info("tool ran name=%s", name)
        return out
    except NotApproved as e:
        log.info("tool denied name=%s", name)
        return e.text
    except NoApprover:
        log.info("tool denied name=%s (no run to ask)", name)
        return f"{name} needs the approval of the person who asked, and there is nobody to ask; it was not run."
    except Exception as e:  # noqa: BLE001 - a failed tool is reported to the model, not the run
        log.info("tool failed name=%s (%s)", name, type(e).__name__)
        return f"{name} failed: {type(e).__name__}."


def _task_for(prompt: Prompt):
    """The Task the call keeps the gate on: the run's, or one of its own."""
    from .adapter import Task

    t = current_task()
    if t is None:
        t = Task.standalone(prompt)
        use_task(t)
    return t


class OpenAIModel:
    """Answers with the chat completions API (OpenAI, Azure OpenAI, Ollama, vLLM, ...)."""

    def __init__(self, config: ModelConfig, http_client: Any = None) -> None:
        """http_client (an httpx.AsyncClient) replaces the library's own, for tests and proxies."""
        import openai

        if not config.base_url or not config.model:
            raise ValueError("bothy: the model needs a base URL and a name (BOTHY_MODEL_BASE_URL, BOTHY_MODEL_NAME)")
        self.cfg = config
        self.client = openai.AsyncOpenAI(base_url=config.base_url, api_key=config.api_key or "none", timeout=config.timeout,
                                         max_retries=max(0, config.max_attempts - 1), http_client=http_client)
        # Without a key no Authorization header is sent at all: the library
        # takes the omission per request.
        self.headers = {} if config.api_key else {"Authorization": openai.omit}
        self.tools = {t.name: t for t in config.tools}

    async def answer(self, prompt: Prompt) -> str:
        """The model's answer to prompt (its tool calls run behind the gate)."""
        task = _task_for(prompt)
        messages: list[dict[str, Any]] = [{"role": "system", "content": prompt.system}, {"role": "user", "content": prompt.user}]
        kw: dict[str, Any] = {"model": self.cfg.model, "extra_headers": self.headers}
        if self.cfg.max_tokens:
            kw["max_tokens"] = self.cfg.max_tokens
        if self.tools:
            kw["tools"] = [{"type": "function", "function": {"name": t.name, "description": t.description,
                                                             "parameters": t.parameters}} for t in self.tools.values()]
        for _ in range(MAX_TOOL_ROUNDS):
            text, calls, finish = await (self._stream(task, messages, kw) if self.cfg.stream else self._once(messages, kw))
            if not calls:
                if not text.strip():
                    raise BadAnswer("empty answer")
                return text + (CUT_NOTE if finish == "length" else "")
            messages.append({"role": "assistant", "content": text or None, "tool_calls": [
                {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}} for c in calls]})
            for c in calls:
                messages.append({"role": "tool", "tool_call_id": c["id"], "content": await _call_tool(self.tools, c["name"], c["arguments"])})
        raise BadAnswer("too many rounds of tool calls")

    async def _once(self, messages: list, kw: dict) -> tuple[str, list[dict], str]:
        r = await self.client.chat.completions.create(messages=messages, **kw)
        if not getattr(r, "choices", None):
            raise BadAnswer("no choices")
        ch = r.choices[0]
        calls = [{"id": c.id, "name": c.function.name, "arguments": c.function.arguments or "{}"}
                 for c in ch.message.tool_calls or []]
        content = ch.message.content
        if not calls and not isinstance(content, str):
            raise BadAnswer("no text")
        return content or "", calls, ch.finish_reason or ""

    async def _stream(self, task, messages: list, kw: dict) -> tuple[str, list[dict], str]:
        parts: list[str] = []
        calls: dict[int, dict] = {}
        finish = ""
        stream = await self.client.chat.completions.create(messages=messages, stream=True, **kw)
        async with stream:
            async for chunk in stream:
                if not chunk.choices:
                    continue
                ch = chunk.choices[0]
                finish = ch.finish_reason or finish
                d = ch.delta
                if d.content:
                    parts.append(d.content)
                    task.stream(d.content)
                for c in d.tool_calls or []:
                    cur = calls.setdefault(c.index, {"id": "", "name": "", "arguments": ""})
                    cur["id"] = c.id or cur["id"]
                    if c.function is not None:
                        cur["name"] += c.function.name or ""
                        cur["arguments"] += c.function.arguments or ""
        return "".join(parts), [calls[i] for i in sorted(calls)], finish


class AnthropicModel:
    """Answers with Anthropic's Messages API. ``base_url`` is the server
    without ``/v1`` ("" for Anthropic's own)."""

    def __init__(self, config: ModelConfig, max_tokens: int = 1024, http_client: Any = None) -> None:
        """max_tokens applies when config.max_tokens is None; http_client (an
        httpx.AsyncClient) replaces the library's own."""
        import anthropic

        if not config.model:
            raise ValueError("bothy: the model needs a name (BOTHY_MODEL_NAME)")
        self.cfg = config
        base = config.base_url.rstrip("/")
        base = base[:-3] if base.endswith("/v1") else base
        self.client = anthropic.AsyncAnthropic(base_url=base or None, api_key=config.api_key or None, timeout=config.timeout,
                                               max_retries=max(0, config.max_attempts - 1), http_client=http_client)
        self.max_tokens = config.max_tokens or max_tokens
        self.tools = {t.name: t for t in config.tools}

    async def answer(self, prompt: Prompt) -> str:
        """The model's answer to prompt (its tool calls run behind the gate)."""
        task = _task_for(prompt)
        messages: list[dict[str, Any]] = [{"role": "user", "content": prompt.user}]
        kw: dict[str, Any] = {"model": self.cfg.model, "system": prompt.system, "max_tokens": self.max_tokens}
        if self.tools:
            kw["tools"] = [{"name": t.name, "description": t.description, "input_schema": t.parameters} for t in self.tools.values()]
        for _ in range(MAX_TOOL_ROUNDS):
            if self.cfg.stream:
                async with self.client.messages.stream(messages=messages, **kw) as s:
                    async for piece in s.text_stream:
                        task.stream(piece)
                    msg = await s.get_final_message()
            else:
                msg = await self.client.messages.create(messages=messages, **kw)
            uses = [b for b in msg.content if b.type == "tool_use"]
            text = "".join(b.text for b in msg.content if b.type == "text")
            if not uses:
                if not text.strip():
                    raise BadAnswer("empty answer")
                return text + (CUT_NOTE if msg.stop_reason == "max_tokens" else "")
            messages.append({"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in msg.content]})
            results = []
            for b in uses:
                out = await _call_tool(self.tools, b.name, json.dumps(b.input))
                results.append({"type": "tool_result", "tool_use_id": b.id, "content": out})
            messages.append({"role": "user", "content": results})
        raise BadAnswer("too many rounds of tool calls")


def model_from_env(http_client: Any = None, **kw: Any) -> OpenAIModel | AnthropicModel:
    """The backend ``BOTHY_MODEL`` names (``openai``, the default, or
    ``anthropic``, as ``bothy agent run --model`` reads it) on
    :meth:`ModelConfig.from_env` with kw set on it; http_client as for the
    backends."""
    which = os.environ.get("BOTHY_MODEL", "") or "openai"
    cfg = ModelConfig.from_env(**kw)
    if which == "openai":
        return OpenAIModel(cfg, http_client=http_client)
    if which == "anthropic":
        return AnthropicModel(cfg, http_client=http_client)
    raise ValueError(f"bothy: BOTHY_MODEL must be openai or anthropic, not {which!r}")
