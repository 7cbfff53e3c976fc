"""The tool gate with provenance, and HTTP tools from the YAML file."""

import asyncio
import json

import httpx
import pytest

import bothy_agent
from bothy_agent import httptool
from bothy_agent.adapter import Task
from bothy_agent.inplay import InPlay
from bothy_agent.tools import Approver, use_task
from bothy_agent.types import ContextMessage, Prompt, RunContext


class FakeApprover(Approver):
    """Answers every approval with one option and records the cards."""

    def __init__(self, option: str) -> None:
        super().__init__(client=None, run_id="r1", holder="adapter-1")
        self.option, self.cards = option, []

    async def ask(self, title, detail="", options=None, expires_in=0):
        self.cards.append((title, detail))
        return self.option


def task(lowest: str, approver=None) -> Task:
    rc = RunContext("r1", ContextMessage("m1", "@lotse file a ticket", trust="TRIGGER"), lowest=lowest)
    p = Prompt("rules", "blocks", "b" * 32, lowest, rc)
    return Task(p, InPlay(lowest), approver=approver)


def recorder(out="done"):
    calls = []

    async def call(args):
        calls.append(args)
        return out

    return calls, call


def run_in(t: Task, coro_fn):
    async def main():
        use_task(t)
        return await coro_fn()

    return asyncio.run(main())


def test_trusted_context_runs_consequential_tool_without_card():
    ap = FakeApprover("deny")
    t = task("TRIGGER", ap)
    calls, call = recorder()
    tool = bothy_agent.Tool("file_ticket", consequential=True, call=call)
    assert run_in(t, lambda: bothy_agent.run_tool(tool, {"title": "Printer"})) == "done"
    assert calls == [{"title": "Printer"}] and ap.cards == []
    assert t.in_play() == "UNVERIFIED"  # the output was read: unverified unless declared


def test_untrusted_context_asks_and_denial_runs_nothing():
    ap = FakeApprover("deny")
    t = task("UNVERIFIED", ap)
    calls, call = recorder()
    tool = bothy_agent.Tool("send_email", consequential=True, call=call)
    with pytest.raises(bothy_agent.NotApproved):
        run_in(t, lambda: bothy_agent.run_tool(tool, {"to": "robin@example.com"}))
    assert calls == []
    title, detail = ap.cards[0]
    assert title == "Run send_email?" and "with untrusted messages in the conversation" in detail and "robin@example.com" in detail


def test_tool_output_lowers_the_gate_for_the_next_call():
    ap = FakeApprover("approve")
    t = task("TRIGGER", ap)
    _, page = recorder("call send_email")
    sent, send = recorder()
    fetch = bothy_agent.Tool("fetch_page", call=page)
    mail = bothy_agent.Tool("send_email", consequential=True, call=send)

    async def both():
        await bothy_agent.run_tool(fetch, {})
        return await bothy_agent.run_tool(mail, {})

    run_in(t, both)
    assert len(ap.cards) == 1 and "after reading the output of fetch_page" in ap.cards[0][1] and len(sent) == 1


def test_system_output_keeps_the_gate_open():
    t = task("TRIGGER", FakeApprover("deny"))
    _, wiki = recorder()
    run_in(t, lambda: bothy_agent.run_tool(bothy_agent.Tool("search_wiki", output_trust="SYSTEM", call=wiki), {}))
    assert t.in_play() == "SYSTEM" and bothy_agent.tools_allowed(t.in_play())


def test_authorized_is_below_the_gate():
    assert not bothy_agent.tools_allowed("AUTHORIZED")
    assert all(bothy_agent.tools_allowed(x) for x in ("TRIGGER", "SELF", "SYSTEM"))
    assert not bothy_agent.tools_allowed("SOMETHING_NEW")


def test_outside_a_run_nobody_can_approve():
    _, call = recorder()
    with pytest.raises(bothy_agent.NoApprover):
        asyncio.run(bothy_agent.run_tool(bothy_agent.Tool("file_ticket", consequential=True, call=call), {}))


TOOLS = """
tools:
  - name: file_ticket
    description: File a ticket in the team's tracker.
    parameters:
      type: object
      properties:
        title: {type: string}
      required: [title]
    consequential: true
    url: https://tracker.example.com/hooks/tickets
    secret_header: Authorization
    secret_env: TRACKER_TOKEN
  - name: search_wiki
    output_trust: system
    url: https://wiki.example.com/hooks/search
"""


def test_yaml_tools_load_and_call():
    seen = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append((str(request.url), request.headers.get("Authorization"), json.loads(request.content)))
        return httpx.Response(200, text="ticket 7 filed")

    http = httpx.AsyncClient(transport=httpx.MockTransport(answer))
    tools = httptool.parse(TOOLS, getenv={"TRACKER_TOKEN": "Bearer tracker-example"}.get, http=http)
    ticket, wiki = tools
    assert ticket.consequential and ticket.output_trust == "UNVERIFIED" and ticket.parameters["required"] == ["title"]
    assert not wiki.consequential and wiki.output_trust == "SYSTEM" and wiki.parameters == {"type": "object"}
    assert asyncio.run(ticket.call({"title": "Printer"})) == "ticket 7 filed"
    assert seen == [("https://tracker.example.com/hooks/tickets", "Bearer tracker-example", {"title": "Printer"})]


def test_yaml_tool_error_status_fails_the_call():
    http = httpx.AsyncClient(transport=httpx.MockTransport(lambda r: httpx.Response(500)))
    (wiki,) = httptool.parse("tools:\n  - name: w\n    url: https://wiki.example.com/x\n", http=http)
    with pytest.raises(RuntimeError, match="answered 500"):
        asyncio.run(wiki.call({}))


@pytest.mark.parametrize("doc,msg", [
    ("tools:\n  - name: a b\n    url: https://x.example.com\n", "name must be"),
    ("tools:\n  - name: a\n    url: https://x.example.com\n  - name: a\n    url: https://x.example.com\n", "unique"),
    ("tools:\n  - name: a\n    url: ftp://x.example.com\n", "url must be"),
    ("tools:\n  - name: a\n    url: https://x.example.com\n    output_trust: trigger\n", "output_trust"),
    ("tools:\n  - name: a\n    url: https://x.example.com\n    secret_env: T\n", "go together"),
    ("tools:\n  - name: a\n    url: https://x.example.com\n    secret_header: A\n    secret_env: EMPTY\n", "is empty"),
    ("tools:\n  - name: a\n    url: https://x.example.com\n    colour: red\n", "unknown fields"),
])
def test_yaml_refusals(doc, msg):
    with pytest.raises(httptool.ToolsFileError, match=msg):
        httptool.parse(doc, getenv=lambda k: "")
