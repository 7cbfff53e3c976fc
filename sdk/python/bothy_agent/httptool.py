"""HTTP tools from a YAML file, the format of ``bothy agent run --tools``
(docs/adapter.md#http-tools): each tool POSTs the model's arguments as JSON
to its URL, with a secret header read from the environment, and hands the
answer back to the model."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

import httpx
import yaml

from .tools import Tool
from .types import SYSTEM, UNVERIFIED

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_OUTPUT_TRUST = {None: UNVERIFIED, "": UNVERIFIED, "unverified": UNVERIFIED, "system": SYSTEM}
_FIELDS = {"name", "description", "parameters", "consequential", "output_trust", "url", "secret_header", "secret_env"}


class ToolsFileError(ValueError):
    """A tools file that cannot be loaded; the message names the tool."""


def load(path: str, *, getenv: Callable[[str], str | None] = os.environ.get, timeout: float = 30.0,
         max_answer_bytes: int = 16 << 10, http: httpx.AsyncClient | None = None) -> list[Tool]:
    """Reads the tools file at path (see :func:`parse`)."""
    with open(path, encoding="utf-8") as f:
        return parse(f.read(), getenv=getenv, timeout=timeout, max_answer_bytes=max_answer_bytes, http=http)


def parse(data: str, *, getenv: Callable[[str], str | None] = os.environ.get, timeout: float = 30.0,
          max_answer_bytes: int = 16 << 10, http: httpx.AsyncClient | None = None) -> list[Tool]:
    """Reads a tools file: ``tools:`` with name, description, parameters (JSON
    Schema), consequential, output_trust (unverified or system), url,
    secret_header and secret_env. Unknown fields, bad names, non-http URLs,
    another output_trust and an empty secret variable are refused."""
    try:
        doc = yaml.safe_load(data) or {}
    except yaml.YAMLError as e:
        raise ToolsFileError(f"httptool: tools file: {e}") from e
    if not isinstance(doc, Mapping) or set(doc) - {"tools"}:
        raise ToolsFileError("httptool: tools file: only a list under tools is allowed")
    out: list[Tool] = []
    seen: set[str] = set()
    for i, s in enumerate(doc.get("tools") or [], 1):
        if not isinstance(s, Mapping):
            raise ToolsFileError(f"httptool: tool {i}: not a mapping")
        name = str(s.get("name") or "")
        where = f"httptool: tool {i} ({name})"
        if unknown := set(s) - _FIELDS:
            raise ToolsFileError(f"{where}: unknown fields {sorted(unknown)}")
        if not _NAME.match(name) or name in seen:
            raise ToolsFileError(f"{where}: name must be 1 to 64 of letters, digits, '_' and '-', unique")
        seen.add(name)
        url = str(s.get("url") or "")
        u = urlsplit(url)
        if u.scheme not in ("http", "https") or not u.netloc:
            raise ToolsFileError(f"{where}: url must be an http or https URL")
        trust = _OUTPUT_TRUST.get(s.get("output_trust"))
        if trust is None:
            raise ToolsFileError(f"{where}: output_trust must be unverified or system")
        header, env = s.get("secret_header") or "", s.get("secret_env") or ""
        if bool(header) != bool(env):
            raise ToolsFileError(f"{where}: secret_header and secret_env go together")
        secret = ""
        if env and not (secret := getenv(env) or ""):
            raise ToolsFileError(f"{where}: the variable {env} of its secret is empty")
        params = s.get("parameters") or {"type": "object"}
        out.append(Tool(name=name, description=str(s.get("description") or ""), parameters=dict(params),
                        consequential=bool(s.get("consequential")), output_trust=trust,
                        call=_caller(name, url, header, secret, timeout, max_answer_bytes, http)))
    return out


def _caller(name: str, url: str, header: str, secret: str, timeout: float, limit: int, http: httpx.AsyncClient | None):
    async def call(args: dict[str, Any]) -> str:
        if not isinstance(args, dict):
            raise ValueError("httptool: the arguments are no JSON object")
        headers = {"Content-Type": "application/json", "User-Agent": "bothy-httptool"}
        if header:
            headers[header] = secret
        client = http or httpx.AsyncClient(timeout=timeout)
        try:
            resp = await client.post(url, content=json.dumps(args), headers=headers, timeout=timeout)
        except httpx.HTTPError as e:
            raise RuntimeError(f"httptool: {name}: request failed: {type(e).__name__}") from e
        finally:
            if http is None:
                await client.aclose()
        body = resp.content
        text = body[:limit].decode(errors="ignore") + (" (cut)" if len(body) > limit else "")
        if resp.status_code // 100 != 2:
            raise RuntimeError(f"httptool: {name}: answered {resp.status_code}")
        return text

    return call
