"""The agent's stream over WebSocket (graphql-transport-ws on /graphql),
with the contract of the long poll: pages of events after a cursor."""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from typing import Any

import websockets

from .errors import Forbidden, NetworkError, Unauthorized

Q_SUBSCRIBE = "subscription AgentEvents($after: String) { agentEvents(after: $after) { seq type payload } }"
#: Closes after which subscribing again cannot help.
_UNAUTHORIZED = (4401, 4403)
_REFUSED = (4406, 4429)
log = logging.getLogger("bothy_agent")


class NoWebSocket(Exception):
    """The server offers no WebSocket: read the stream by long poll."""


class AgentStream:
    """A subscription to the agent's events that pages like the long poll:
    :meth:`next` returns the events after cursor within ``wait`` seconds,
    (re)subscribing from the cursor after any close."""

    def __init__(self, server: str, token: str) -> None:
        self.url = "ws" + server[len("http"):] + "/graphql"
        self.token = token
        self._ws: Any = None
        self._cursor: str | None = None
        self._queue: asyncio.Queue = asyncio.Queue()
        self._reader: asyncio.Task | None = None

    async def _open(self, after: str | None) -> None:
        await self.close()
        try:
            ws = await websockets.connect(self.url, subprotocols=["graphql-transport-ws"], open_timeout=10)
        except websockets.InvalidStatus as e:
            if e.response.status_code in (400, 404, 405, 426):
                raise NoWebSocket(str(e)) from e
            raise NetworkError("AgentEvents", f"websocket refused ({e.response.status_code})") from e
        except (OSError, asyncio.TimeoutError, websockets.WebSocketException) as e:
            raise NetworkError("AgentEvents", type(e).__name__) from e
        try:
            await ws.send(json.dumps({"type": "connection_init", "payload": {"Authorization": "Bearer " + self.token}}))
            # The protocol subscribes only after the server acknowledged the connection.
            await asyncio.wait_for(self._acknowledged(ws), 10)
        except websockets.ConnectionClosed as e:
            await ws.close()
            raise self._closed(e) from e
        except (OSError, asyncio.TimeoutError, ValueError) as e:
            await ws.close()
            raise NetworkError("AgentEvents", "no connection_ack") from e
        await ws.send(json.dumps({"id": str(uuid.uuid4()), "type": "subscribe",
                                  "payload": {"query": Q_SUBSCRIBE, "variables": {"after": after}}}))
        self._ws, self._cursor = ws, after
        self._queue = asyncio.Queue()
        self._reader = asyncio.create_task(self._read(ws, self._queue))
        log.info("agent stream subscribed over WebSocket after=%s", after)

    @staticmethod
    async def _acknowledged(ws: Any) -> None:
        while True:
            msg = json.loads(await ws.recv())
            if msg.get("type") == "connection_ack":
                return
            if msg.get("type") == "ping":
                await ws.send(json.dumps({"type": "pong"}))

    @staticmethod
    def _closed(e: websockets.ConnectionClosed) -> Exception:
        code = e.rcvd.code if e.rcvd else 1006
        if code in _UNAUTHORIZED:
            return Unauthorized("AgentEvents", "the token does not authenticate", code="unauthorized", status=401)
        if code in _REFUSED:
            return Forbidden("AgentEvents", f"the server refused the subscription ({code})", code="forbidden", status=403)
        return NetworkError("AgentEvents", f"the server closed the subscription ({code})")

    async def _read(self, ws: Any, q: asyncio.Queue) -> None:
        try:
            async for raw in ws:
                msg = json.loads(raw)
                t = msg.get("type")
                if t == "ping":
                    await ws.send(json.dumps({"type": "pong"}))
                elif t == "next":
                    payload = msg.get("payload") or {}
                    ev = (payload.get("data") or {}).get("agentEvents")
                    if ev is None:
                        await q.put(NetworkError("AgentEvents", "no data in the subscription's answer"))
                        return
                    await q.put(ev)
                elif t in ("error", "complete"):
                    await q.put(NetworkError("AgentEvents", "the server ended the subscription"))
                    return
            await q.put(NetworkError("AgentEvents", "the socket closed"))
        except websockets.ConnectionClosed as e:
            await q.put(self._closed(e))
        except (OSError, ValueError) as e:
            await q.put(NetworkError("AgentEvents", type(e).__name__))

    async def next(self, after: str | None, wait: float) -> dict[str, Any]:
        """The events after cursor ``after`` that come within wait seconds, as
        {events, nextAfter}. Raises the close's error (Unauthorized and
        Forbidden end the stream; the others are temporary)."""
        if self._ws is None or after != self._cursor:
            await self._open(after)
        events: list[dict[str, Any]] = []
        try:
            first = await asyncio.wait_for(self._queue.get(), wait)
        except asyncio.TimeoutError:
            return {"events": [], "nextAfter": self._cursor}
        for item in [first] + [self._queue.get_nowait() for _ in range(self._queue.qsize())]:
            if isinstance(item, Exception):
                # Whatever came before the error is handed out; the next call
                # subscribes again from the cursor, so nothing is lost.
                await self.close()
                if events:
                    break
                raise item
            events.append(item)
        if events:
            self._cursor = events[-1]["seq"]
        return {"events": events, "nextAfter": self._cursor}

    async def close(self) -> None:
        """Ends the subscription and its socket."""
        if self._reader is not None:
            self._reader.cancel()
            self._reader = None
        if self._ws is not None:
            try:
                await self._ws.close()
            except Exception:  # noqa: BLE001 - closing a broken socket may fail; it is gone either way
                pass
            self._ws = None
