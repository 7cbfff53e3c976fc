"""The client: refusals become the protocol's exceptions, holders ride on
every call on a claimed run, the run's trace context on its calls only."""

import asyncio

import httpx
import pytest

import bothy_agent
from bothy_agent.client import traceparent_var
from conftest import refusal

TP = "00-0123456789abcdef0123456789abcdef-0123456789abcdef-01"


@pytest.mark.parametrize("reason,cls", [("run_claimed", bothy_agent.RunClaimed), ("run_not_active", bothy_agent.RunNotActive),
                                        ("trigger_revoked", bothy_agent.TriggerRevoked),
                                        ("idempotency_key_reused", bothy_agent.IdempotencyKeyReused),
                                        ("run_not_started", bothy_agent.RunNotStarted), ("live_version", bothy_agent.LiveVersion),
                                        ("approval_pending", bothy_agent.ApprovalPending),
                                        ("already_decided", bothy_agent.AlreadyDecided)])
def test_reasons_raise_their_class(server, reason, cls):
    server.routes["FinishRun"] = lambda v: refusal("conflict", reason)
    with pytest.raises(cls) as e:
        asyncio.run(server.client().finish_run("r1", "adapter-1", "COMPLETED"))
    assert isinstance(e.value, bothy_agent.Conflict) and e.value.reason == reason and not e.value.temporary


def test_retry_after_and_temporary(server):
    server.routes["Viewer"] = lambda v: {**refusal("unavailable", status=503), "_headers": {"Retry-After": "3"}}
    with pytest.raises(bothy_agent.BothyError) as e:
        asyncio.run(server.client().viewer())
    assert e.value.code == "unavailable" and e.value.retry_after == 3 and e.value.temporary


def test_network_error_is_temporary():
    def fail(request):
        raise httpx.ConnectError("refused")

    c = bothy_agent.Client("https://chat.example.com", "t", http=httpx.AsyncClient(transport=httpx.MockTransport(fail)))
    with pytest.raises(bothy_agent.NetworkError) as e:
        asyncio.run(c.viewer())
    assert e.value.temporary


def test_holder_on_every_call_of_a_claimed_run(server):
    server.routes.update({
        "StartRun": lambda v: {"data": {"startRun": {"id": "r1"}}},
        "RenewRun": lambda v: {"data": {"renewRun": {"id": "r1"}}},
        "CreateMessage": lambda v: {"data": {"createMessage": {"replayed": False, "message": {"id": "m9"}}}},
        "FinishRun": lambda v: {"data": {"finishRun": {"state": "COMPLETED"}}},
        "UpdateRunLive": lambda v: {"data": {"updateRunLive": {"version": 1}}},
        "RequestApproval": lambda v: {"data": {"requestApproval": {"id": "ap1", "state": "PENDING", "option": None}}},
    })
    c = server.client()

    async def calls():
        await c.start_run("r1", "adapter-1")
        await c.renew_run("r1", "adapter-1")
        await c.update_run_live("r1", "adapter-1", 0, "Hello")
        await c.request_approval("r1", "adapter-1", "Run send_email?", "", [{"id": "approve", "label": "Approve"}])
        await c.create_message("t1", "adapter-1", "answer-r1-m1", "Hello Alex", "r1", "TRIGGER")
        await c.finish_run("r1", "adapter-1", "COMPLETED")

    asyncio.run(calls())
    assert [v.get("holder") for _, v, _ in server.calls] == ["adapter-1"] * 6
    create = server.calls[4][1]["input"]
    assert create == {"clientMsgId": "answer-r1-m1", "contentMd": "Hello Alex", "runId": "r1", "inputTrust": "TRIGGER"}


def test_message_without_run_names_no_holder(server):
    server.routes["CreateMessage"] = lambda v: {"data": {"createMessage": {"replayed": True, "message": {"id": "m9"}}}}
    asyncio.run(server.client().create_message("t1", "adapter-1", "answer-r1-m1", "Hello", "", "UNVERIFIED"))
    v = server.calls[0][1]
    assert v["holder"] is None and "runId" not in v["input"]


def test_traceparent_on_run_calls_not_on_stream_calls(server):
    server.routes["RenewRun"] = lambda v: {"data": {"renewRun": {"id": "r1"}}}
    server.routes["AgentEvents"] = lambda v: {"data": {"agentEvents": {"events": [], "nextAfter": "7"}}}
    server.routes["AckAgentEvents"] = lambda v: {"data": {"ackAgentEvents": {"position": "7"}}}
    c = server.client()

    async def calls():
        traceparent_var.set(TP)
        await c.renew_run("r1", "adapter-1")
        await c.agent_events("6", 0)
        await c.ack_agent_events("7")

    asyncio.run(calls())
    assert [h.get("traceparent") for _, _, h in server.calls] == [TP, None, None]


def test_holder_headers_for_rest():
    assert bothy_agent.holder_headers("adapter-00000000000000aa") == {"Bothy-Run-Holder": "adapter-00000000000000aa"}
    assert bothy_agent.holder_headers("") == {}  # the anonymous holder names none
