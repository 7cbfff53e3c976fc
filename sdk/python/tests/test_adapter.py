"""The run contract against a fake server: context before the claim, the
holder on every call of the run, the answer under the request's key with
its in-play trust, the end, and acknowledgements only after handling."""

import asyncio
import itertools

import bothy_agent
from bothy_agent.adapter import Adapter
from conftest import refusal

HOLDER = "adapter-00000000000000aa"


def element(mid, text, trust="TRIGGER", seq=1):
    return {"messageId": mid, "threadSeq": seq, "author": {"id": "p1", "kind": "USER", "handle": "alex", "displayName": "Alex"},
            "origin": "HUMAN", "kind": "USER", "contentMd": text, "truncated": False, "attachments": [], "trust": trust,
            "provenance": trust, "alreadyDelivered": False}


def context(*follow_ups, lowest="TRIGGER"):
    return {"data": {"run": {"context": {"runId": "r1", "triggerMessage": element("m1", "@lotse is the printer fixed?"),
                                         "threadContext": [], "channelContext": None, "followUps": list(follow_ups),
                                         "trustSummary": {"lowest": lowest}}}}}


def serve(server, pages, contexts):
    """Routes a run r1 in thread t1: the stream hands out pages, then nothing;
    each context read takes the next of contexts (the last one repeats)."""
    pages, ctxs = iter(pages), itertools.chain(contexts, itertools.repeat(contexts[-1]))
    server.routes.update({
        "Viewer": lambda v: {"data": {"viewer": {"id": "a1", "kind": "AGENT", "handle": "lotse"}}},
        "AgentEvents": lambda v: {"data": {"agentEvents": next(pages, {"events": [], "nextAfter": v["after"] or "0"})}},
        "RunContext": lambda v: next(ctxs),
        "StartRun": lambda v: {"data": {"startRun": {"id": "r1", "state": "RUNNING", "triggeringMessageId": "m1", "answers": [],
                                                     "leaseExpiresAt": "2099-01-01T00:00:00Z", "traceparent": None}}},
        "CreateMessage": lambda v: {"data": {"createMessage": {"replayed": False, "message": {"id": "m9"}}}},
        "FinishRun": lambda v: {"data": {"finishRun": {"id": "r1", "state": "COMPLETED"}}},
        "AckAgentEvents": lambda v: {"data": {"ackAgentEvents": {"position": v["upTo"]}}},
    })


def invocation(seq="1"):
    return {"seq": seq, "type": "agent.invocation", "payload": {"run_id": "r1", "thread_id": "t1", "message_id": "m1", "attempt": 1}}


def adapter(server, handler):
    cfg = bothy_agent.Config(server="https://chat.example.com", token="bothy_a_example", transport="poll", poll_wait=0,
                             once=True, holder=HOLDER)
    return Adapter(cfg, handler, client=server.client())


def test_answers_once_with_key_holder_and_input_trust(server):
    serve(server, [{"events": [invocation()], "nextAfter": "1"}], [context()])

    async def handle(task):
        assert task.context.trigger_message.content_md == "@lotse is the printer fixed?"
        assert task.holder == HOLDER and task.run_id == "r1" and task.in_play() == "TRIGGER"
        await task.answer("It is, Alex.")

    asyncio.run(asyncio.wait_for(adapter(server, handle).run(), 60))
    ops = server.ops()
    assert ops.index("RunContext") < ops.index("StartRun") < ops.index("CreateMessage") < ops.index("FinishRun")
    by_op = {op: v for op, v, _ in server.calls}
    assert by_op["StartRun"]["holder"] == HOLDER and by_op["FinishRun"]["holder"] == HOLDER
    assert by_op["CreateMessage"]["holder"] == HOLDER
    assert by_op["CreateMessage"]["input"] == {"clientMsgId": "answer-r1-m1", "contentMd": "It is, Alex.", "runId": "r1",
                                               "inputTrust": "TRIGGER"}
    assert by_op["FinishRun"]["input"] == {"outcome": "COMPLETED"}
    assert ("AckAgentEvents", {"upTo": "1"}) in [(op, v) for op, v, _ in server.calls]


def test_followup_acknowledged_only_after_the_model_saw_it(server):
    followup = {"seq": "2", "type": "agent.followup", "payload": {"run_id": "r1", "message_id": "f1"}}
    f1 = element("f1", "and the scanner?", seq=2)
    serve(server, [{"events": [invocation(), followup], "nextAfter": "2"}], [context(), context(f1)])
    acks_while_working = []

    async def handle(task):
        await asyncio.sleep(1.2)  # longer than the acknowledger's second
        acks_while_working.append([v["upTo"] for op, v, _ in server.calls if op == "AckAgentEvents"])
        await task.answer("Printer fixed" + "".join(", and " + f.content_md for f in task.follow_ups))

    asyncio.run(asyncio.wait_for(adapter(server, handle).run(), 60))
    assert "2" not in acks_while_working[0]  # round 1: the model had not seen f1
    calls = [(op, v) for op, v, _ in server.calls]
    post = next(i for i, (op, _) in enumerate(calls) if op == "CreateMessage")
    ack2 = next(i for i, (op, v) in enumerate(calls) if op == "AckAgentEvents" and v["upTo"] == "2")
    assert ack2 < post  # delivered before the answer that covers it is posted
    assert calls[post][1]["input"]["clientMsgId"] == "answer-r1-f1"
    assert "and the scanner?" in calls[post][1]["input"]["contentMd"]


def test_trigger_revoked_at_post_drops_the_reply(server):
    serve(server, [{"events": [invocation()], "nextAfter": "1"}], [context()])
    server.routes["CreateMessage"] = lambda v: refusal("conflict", "trigger_revoked")

    async def handle(task):
        await task.answer("It is, Alex.")

    asyncio.run(asyncio.wait_for(adapter(server, handle).run(), 60))
    creates = [v for op, v, _ in server.calls if op == "CreateMessage"]
    assert len(creates) == 1 and creates[0]["input"]["runId"] == "r1"  # never again without the run
    finishes = [v for op, v, _ in server.calls if op == "FinishRun"]
    assert [f["input"]["outcome"] for f in finishes] == ["CANCELLED"]


def test_handler_failure_fails_the_run_with_its_reason(server):
    serve(server, [{"events": [invocation()], "nextAfter": "1"}], [context()])

    async def handle(task):
        task.fail("model_error")

    asyncio.run(asyncio.wait_for(adapter(server, handle).run(), 60))
    assert "CreateMessage" not in server.ops()
    assert [v["input"] for op, v, _ in server.calls if op == "FinishRun"] == [{"outcome": "FAILED", "reason": "model_error"}]


def test_claimed_elsewhere_is_skipped(server):
    serve(server, [{"events": [invocation()], "nextAfter": "1"}], [context()])
    server.routes["StartRun"] = lambda v: refusal("conflict", "run_claimed")

    async def handle(task):
        raise AssertionError("a run another holder claimed reached the handler")

    async def main():
        a = adapter(server, handle)
        a.cfg.once = False
        t = asyncio.create_task(a.run())
        await asyncio.sleep(0.5)
        t.cancel()
        await asyncio.gather(t, return_exceptions=True)

    asyncio.run(main())
    assert "CreateMessage" not in server.ops() and "FinishRun" not in server.ops()


def test_max_concurrent_keeps_the_lease_of_a_waiting_run(server):
    inv2 = {"seq": "2", "type": "agent.invocation", "payload": {"run_id": "r2", "thread_id": "t1", "message_id": "m1", "attempt": 1}}
    serve(server, [{"events": [invocation(), inv2], "nextAfter": "2"}], [context()])
    server.routes["StartRun"] = lambda v: {"data": {"startRun": {"id": v["id"], "state": "RUNNING", "triggeringMessageId": "m1",
                                                                 "answers": [], "leaseExpiresAt": "2000-01-01T00:00:00Z"}}}
    server.routes["RenewRun"] = lambda v: {"data": {"renewRun": {"id": v["id"]}}}
    running, most = [0], [0]

    def r2_renewed():
        return any(op == "RenewRun" and v["id"] == "r2" for op, v, _ in server.calls)

    async def handle(task):
        running[0] += 1
        most[0] = max(most[0], running[0])
        # The first run holds the only slot until the waiting run has
        # renewed its claim (the test's time limit fails an adapter that
        # never renews it).
        while not r2_renewed():
            await asyncio.sleep(0.02)
        running[0] -= 1
        await task.answer("Done, Alex.")

    async def main():
        a = adapter(server, handle)
        a.cfg.once, a.cfg.max_concurrent = False, 1
        a._sem = asyncio.Semaphore(1)
        t = asyncio.create_task(a.run())
        while [op for op, _, _ in server.calls].count("FinishRun") < 2:
            await asyncio.sleep(0.05)
        t.cancel()
        await asyncio.gather(t, return_exceptions=True)

    asyncio.run(asyncio.wait_for(main(), 60))
    assert most[0] == 1
    # The run that waited for the slot renewed its claim meanwhile.
    assert any(op == "RenewRun" and v["id"] == "r2" for op, v, _ in server.calls[:[op for op, _, _ in server.calls].index("FinishRun")])


def test_ack_loop_ends_when_its_stop_meets_a_kick(server):
    # Python 3.11's wait_for returns the kick's result instead of raising a
    # cancel that arrives once the kick is in: the loop must end on its flag.
    serve(server, [], [context()])

    async def main():
        a = adapter(server, None)
        stop = asyncio.Event()
        for delay in range(4):
            t = asyncio.create_task(a._ack_loop(stop))
            await asyncio.sleep(0)
            a.ledger.kick.set()
            for _ in range(delay):
                await asyncio.sleep(0)
            stop.set()
            t.cancel()
            await asyncio.wait_for(asyncio.gather(t, return_exceptions=True), 5)
            stop.clear()

    asyncio.run(main())
