"""Answer keys: one per request, the same across attempts; an answer under a
request's key covers it and every earlier one."""

from bothy_agent.answers import answer_key, answered_beyond, answered_up_to, request_stands, requests_of


def test_key_names_run_and_request():
    assert answer_key("r1", "m1") == "answer-r1-m1"


def test_answered_up_to():
    reqs = requests_of("m1", ["f1", "f2"])
    assert answered_up_to("r1", reqs, []) == 0
    assert answered_up_to("r1", reqs, ["answer-r1-f1"]) == 2
    assert answered_up_to("r1", reqs, ["answer-r1-f2"]) == 3
    assert answered_up_to("r1", reqs, ["answer-r1"]) == 1  # the key of older versions
    assert answered_up_to("r1", reqs, ["answer-r2-f2"]) == 0


def test_answered_beyond():
    assert answered_beyond("r1", ["m1"], ["answer-r1-f1"])
    assert not answered_beyond("r1", ["m1", "f1"], ["answer-r1-f1"])


def test_request_stands():
    assert request_stands("FAILED", "timeout") and request_stands("FAILED", "lease_expired")
    assert request_stands("COMPLETED", "")
    assert not request_stands("COMPLETED", "trigger_revoked")
    assert not request_stands("CANCELLED", "")
    assert not request_stands("FAILED", "model_error")
