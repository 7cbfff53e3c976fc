"""A fake Bothy GraphQL server on httpx.MockTransport, for the tests that
drive the SDK's calls."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from bothy_agent import Client

Answer = Callable[[dict[str, Any]], dict[str, Any]]

# EMPTY_POLL_WAIT is how long the fake server holds an empty page of the
# agent stream (seconds).
EMPTY_POLL_WAIT = 0.02


class FakeServer:
    """Answers GraphQL operations by name and records every request.

    ``routes`` maps an operation name to a function of the variables that
    returns the GraphQL document (``{"data": ...}`` or ``{"errors": ...}``).
    """

    def __init__(self) -> None:
        self.routes: dict[str, Answer] = {}
        self.calls: list[tuple[str, dict[str, Any], httpx.Headers]] = []

    async def handler(self, request: httpx.Request) -> httpx.Response:
        response = self._answer(request)
        if self.calls[-1][0] == "AgentEvents" and not ((json.loads(response.content).get("data") or {})
                                                       .get("agentEvents") or {}).get("events", True):
            # An empty page comes after a wait, as a long poll's does:
            # with none, an adapter polling without a wait would poll in a
            # tight loop and take a core for as long as the test waits.
            await asyncio.sleep(EMPTY_POLL_WAIT)
        return response

    def _answer(self, request: httpx.Request) -> httpx.Response:
        if request.headers.get("Content-Type", "").startswith("multipart/"):
            # An upload: the operation and the raw body, for the test to read.
            op, variables = "UploadFile", {"_body": request.content.decode("utf-8", "replace")}
        else:
            body = json.loads(request.content)
            op, variables = body["operationName"], body.get("variables") or {}
        self.calls.append((op, variables, request.headers))
        doc = self.routes[op](variables)
        status = doc.pop("_status", 200)
        return httpx.Response(status, json=doc, headers=doc.pop("_headers", {}))

    def client(self) -> Client:
        http = httpx.AsyncClient(transport=httpx.MockTransport(self.handler))
        return Client("https://chat.example.com", "bothy_a_example", http=http)

    def ops(self) -> list[str]:
        return [c[0] for c in self.calls]


def refusal(code: str, reason: str = "", status: int = 409, **ext: Any) -> dict[str, Any]:
    """A GraphQL error document as the server writes a refusal."""
    return {"errors": [{"message": "refused", "extensions": {"code": code, "reason": reason, **ext}}], "data": None,
            "_status": status}


@pytest.fixture
def server() -> FakeServer:
    return FakeServer()
