"""The answer outbox across a restart, and the live box's recovery from a
version conflict."""

import asyncio

import bothy_agent
from bothy_agent.adapter import Adapter
from bothy_agent.live import LiveWriter
from bothy_agent.outbox import Outbox, OutboxEntry
from conftest import refusal


def entry(key="answer-r1-m1", run_id="r1"):
    return OutboxEntry(key, "t1", run_id, "adapter-old", "Printer 2 is fixed, Alex.", "TRIGGER")


def test_outbox_keeps_entries_until_removed(tmp_path):
    box = Outbox(str(tmp_path / "outbox"))
    box.put(entry())
    box.put(entry("answer-r2-m2", "r2"))
    assert sorted(e.key for e in box.entries()) == ["answer-r1-m1", "answer-r2-m2"]
    box.remove("answer-r1-m1")
    box.remove("answer-r1-m1")  # gone already is fine
    assert [e.key for e in Outbox(str(tmp_path / "outbox")).entries()] == ["answer-r2-m2"]


def replay(server, tmp_path, *entries):
    box = tmp_path / "outbox"
    for e in entries:
        Outbox(str(box)).put(e)
    cfg = bothy_agent.Config(server="https://chat.example.com", token="bothy_a_example", outbox=str(box), holder="adapter-new",
                             retry_backoff=0.01)
    asyncio.run(Adapter(cfg, None, client=server.client())._replay_outbox())  # type: ignore[arg-type]
    return Outbox(str(box)).entries()


def test_replay_sends_under_the_same_key_as_the_old_holder(server, tmp_path):
    server.routes["CreateMessage"] = lambda v: {"data": {"createMessage": {"replayed": True, "message": {"id": "m9"}}}}
    left = replay(server, tmp_path, entry())
    (op, v, _), = server.calls
    assert v["holder"] == "adapter-old" and v["input"]["clientMsgId"] == "answer-r1-m1" and v["input"]["runId"] == "r1"
    assert left == []


def test_replay_after_a_timeout_goes_out_without_the_run(server, tmp_path):
    posts = []

    def create(v):
        posts.append(v)
        if "runId" in v["input"]:
            return refusal("conflict", "run_not_active")
        return {"data": {"createMessage": {"replayed": False, "message": {"id": "m9"}}}}

    server.routes["CreateMessage"] = create
    server.routes["Run"] = lambda v: {"data": {"run": {"id": "r1", "state": "FAILED", "endReason": "timeout", "answers": []}}}
    assert replay(server, tmp_path, entry()) == []
    assert [("runId" in p["input"], p["holder"]) for p in posts] == [(True, "adapter-old"), (False, None)]


def test_replay_drops_an_answer_whose_run_was_cancelled(server, tmp_path):
    server.routes["CreateMessage"] = lambda v: refusal("conflict", "run_not_active")
    server.routes["Run"] = lambda v: {"data": {"run": {"id": "r1", "state": "CANCELLED", "endReason": "cancelled", "answers": []}}}
    assert replay(server, tmp_path, entry()) == []
    assert server.ops() == ["CreateMessage", "Run"]


def test_replay_keeps_an_answer_the_server_could_not_take(server, tmp_path):
    server.routes["CreateMessage"] = lambda v: refusal("unavailable", status=503)
    left = replay(server, tmp_path, entry())
    assert [e.key for e in left] == ["answer-r1-m1"]


def test_live_box_recovers_from_a_version_conflict(server):
    versions = iter([refusal("conflict", "live_version", currentVersion=4), {"data": {"updateRunLive": {"version": 5}}},
                     {"data": {"updateRunLive": {"version": 6}}}])
    server.routes["UpdateRunLive"] = lambda v: next(versions)
    server.routes["RunLive"] = lambda v: {"data": {"run": {"live": {"version": 4}}}}

    async def main():
        w = LiveWriter(server.client(), "r1", "adapter-1", 0.01)
        w.add("Printer ")
        await w._send()
        w.add("2 is fixed.")
        await w._send()
        return w

    w = asyncio.run(main())
    updates = [v["input"] for op, v, _ in server.calls if op == "UpdateRunLive"]
    assert updates[0] == {"baseVersion": 0, "append": "Printer "}
    assert updates[1] == {"baseVersion": 4, "replace": "Printer "}  # the whole text again, on the current version
    assert updates[2] == {"baseVersion": 5, "append": "2 is fixed."}
    assert w.text == "Printer 2 is fixed." and not w.off
