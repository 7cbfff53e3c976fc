"""The stream over WebSocket (graphql-transport-ws) against a local server:
the token in connection_init, the subscription only after connection_ack,
pages of events from the cursor, a close that ends the stream for good,
and the fallback when there is no socket."""

import asyncio
import json

import pytest
import websockets

from bothy_agent import Unauthorized
from bothy_agent.ws import AgentStream, NoWebSocket


def events(after):
    start = int(after or 0)
    return [{"seq": str(n), "type": "agent.invocation", "payload": {"run_id": f"r{n}", "thread_id": "t1"}} for n in range(start + 1, start + 3)]


async def serve(handler):
    """A websockets server on a free port and the http URL of it."""
    server = await websockets.serve(handler, "127.0.0.1", 0, subprotocols=["graphql-transport-ws"])
    port = server.sockets[0].getsockname()[1]
    return server, f"http://127.0.0.1:{port}"


def test_pages_from_the_cursor():
    seen = []

    async def handler(ws):
        init = json.loads(await ws.recv())
        await ws.send(json.dumps({"type": "ping"}))
        assert json.loads(await ws.recv()) == {"type": "pong"}
        await ws.send(json.dumps({"type": "connection_ack"}))
        sub = json.loads(await ws.recv())
        seen.append((ws.subprotocol, init["payload"], sub["payload"]["variables"]))
        await ws.send(json.dumps({"type": "ping"}))
        for ev in events(sub["payload"]["variables"]["after"]):
            await ws.send(json.dumps({"id": sub["id"], "type": "next", "payload": {"data": {"agentEvents": ev}}}))
        assert json.loads(await ws.recv()) == {"type": "pong"}
        await asyncio.sleep(5)

    async def main():
        server, url = await serve(handler)
        s = AgentStream(url, "bothy_a_example")
        try:
            page = await s.next("7", 2)
            while len(page["events"]) < 2:
                more = await s.next(page["nextAfter"], 2)
                page = {"events": page["events"] + more["events"], "nextAfter": more["nextAfter"]}
            return page
        finally:
            await s.close()
            server.close()

    page = asyncio.run(main())
    assert [e["seq"] for e in page["events"]] == ["8", "9"] and page["nextAfter"] == "9"
    assert seen == [("graphql-transport-ws", {"Authorization": "Bearer bothy_a_example"}, {"after": "7"})]


def test_close_4401_is_unauthorized():
    async def handler(ws):
        await ws.recv()
        await ws.close(4401, "Unauthorized")

    async def main():
        server, url = await serve(handler)
        s = AgentStream(url, "bothy_a_revoked")
        try:
            await s.next(None, 2)
        finally:
            await s.close()
            server.close()

    with pytest.raises(Unauthorized):
        asyncio.run(main())


def test_no_websocket_at_the_server():
    async def main():
        async def refuse(connection, request):
            return connection.respond(404, "no socket here\n")

        server = await websockets.serve(lambda ws: None, "127.0.0.1", 0, process_request=refuse)
        url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        s = AgentStream(url, "bothy_a_example")
        try:
            await s.next(None, 2)
        finally:
            await s.close()
            server.close()

    with pytest.raises(NoWebSocket):
        asyncio.run(main())
