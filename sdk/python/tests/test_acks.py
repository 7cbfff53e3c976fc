"""Acknowledgements only after handling: the position stops in front of a
follow-up the run's model has not seen."""

import asyncio

from bothy_agent.acks import Ledger


def ledger() -> Ledger:
    async def make():
        return Ledger()

    return asyncio.run(make())


def test_position_waits_for_an_unseen_followup():
    lg = ledger()
    lg.track("r1")
    lg.add("1", "agent.invocation", True)
    lg.add("2", "agent.followup", True, "r1", "f1")
    lg.add("3", "run.cancel_requested", True)
    assert lg.target() == "1"
    lg.cover("r1", ["f1"])
    assert lg.target() == "3"


def test_left_invocation_holds_everything_behind_it():
    lg = ledger()
    lg.add("1", "agent.invocation", True)
    lg.add("2", "agent.invocation", False)  # left to a later process (once)
    lg.add("3", "run.cancel_requested", True)
    assert lg.target() == "1"


def test_ended_run_releases_its_followups():
    lg = ledger()
    lg.track("r1")
    lg.add("1", "agent.followup", True, "r1", "f1")
    assert lg.target() == ""
    lg.release("r1", ended=True)
    assert lg.target() == "1"


def test_lost_claim_keeps_followups_waiting():
    lg = ledger()
    lg.track("r1")
    lg.add("1", "agent.followup", True, "r1", "f1")
    lg.release("r1", ended=False)
    assert lg.target() == ""
    e, due = lg.head(0)
    assert e is not None and e.run_id == "r1" and due


def test_ack_delivers_covered_followups():
    lg = ledger()
    lg.track("r1")
    lg.add("1", "agent.followup", True, "r1", "f1")
    lg.cover("r1", ["f1"])
    assert not lg.delivered("r1", ["f1"])
    lg.acked("1", "1")
    assert lg.delivered("r1", ["f1"]) and lg.pending == []


def test_stored_position_passed_by_another_process():
    lg = ledger()
    lg.track("r1")
    lg.add("1", "agent.invocation", True)
    lg.acked("1", "5")
    lg.add("4", "agent.followup", True, "r1", "f1")
    assert lg.target() == "4" and lg.delivered("r1", ["f1"])
