"""The model backends on the official libraries, against fakes of the
providers' APIs: the prompt as system and user message, the key only when
set, tool calls through the gate, streaming into the live box. The
libraries speak httpx2 (their fork of httpx), so the fakes do too."""

import asyncio
import json

import httpx2

import bothy_agent
from bothy_agent.adapter import Task
from bothy_agent.inplay import InPlay
from bothy_agent.tools import use_task
from bothy_agent.types import ContextMessage, Prompt, RunContext


def prompt(lowest="TRIGGER") -> Prompt:
    rc = RunContext("r1", ContextMessage("m1", "@lotse the printer on floor 2 is broken", trust="TRIGGER"), lowest=lowest)
    return Prompt("the rules", "the blocks", "b" * 32, lowest, rc)


def completion(message, finish="stop"):
    return {"id": "c1", "object": "chat.completion", "created": 1, "model": "example-model",
            "choices": [{"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish}]}


def test_openai_answer_without_key_sends_no_authorization():
    seen = []

    def answer(request):
        seen.append((request.url.path, request.headers.get("Authorization"), json.loads(request.content)))
        return httpx2.Response(200, json=completion({"content": "Printer 2 needs a new fuser."}))

    m = bothy_agent.OpenAIModel(bothy_agent.ModelConfig(base_url="https://models.example.com/v1", model="example-model"),
                                http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(answer)))
    assert asyncio.run(m.answer(prompt())) == "Printer 2 needs a new fuser."
    path, auth, body = seen[0]
    assert path == "/v1/chat/completions" and auth is None
    assert body["messages"] == [{"role": "system", "content": "the rules"}, {"role": "user", "content": "the blocks"}]


def test_openai_tool_call_runs_behind_the_gate_and_lowers_in_play():
    ran, bodies = [], []

    async def fetch(args):
        ran.append(args)
        return "the page"

    def answer(request):
        body = json.loads(request.content)
        bodies.append(body)
        if len(bodies) == 1:
            return httpx2.Response(200, json=completion({"content": None, "tool_calls": [
                {"id": "call1", "type": "function", "function": {"name": "fetch_page", "arguments": "{\"url\": \"https://example.com\"}"}}]},
                "tool_calls"))
        return httpx2.Response(200, json=completion({"content": "Read it."}))

    tool = bothy_agent.Tool("fetch_page", "Fetch a page.", {"type": "object"}, call=fetch)
    m = bothy_agent.OpenAIModel(bothy_agent.ModelConfig(base_url="https://models.example.com/v1", model="example-model",
                                                        api_key="sk-example", tools=[tool]),
                                http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(answer)))
    t = Task(prompt(), InPlay("TRIGGER"))

    async def main():
        use_task(t)
        return await m.answer(t.prompt)

    assert asyncio.run(main()) == "Read it."
    assert ran == [{"url": "https://example.com"}] and t.in_play() == "UNVERIFIED"
    assert bodies[0]["tools"][0]["function"]["name"] == "fetch_page"
    assert bodies[1]["messages"][-1] == {"role": "tool", "tool_call_id": "call1", "content": "the page"}


def test_openai_stream_reaches_the_live_box():
    chunks = ["Printer ", "2 is ", "fixed."]
    sse = "".join("data: " + json.dumps({"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
                                         "choices": [{"index": 0, "delta": {"content": c}, "finish_reason": None}]}) + "\n\n"
                  for c in chunks) + "data: [DONE]\n\n"

    def answer(request):
        return httpx2.Response(200, text=sse, headers={"Content-Type": "text/event-stream"})

    class Box:
        def __init__(self):
            self.pieces = []

        def add(self, text="", status=None):
            self.pieces.append(text)

    box = Box()
    t = Task(prompt(), InPlay("TRIGGER"), live=box)  # type: ignore[arg-type]
    m = bothy_agent.OpenAIModel(bothy_agent.ModelConfig(base_url="https://models.example.com/v1", model="m", stream=True),
                                http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(answer)))

    async def main():
        use_task(t)
        return await m.answer(t.prompt)

    assert asyncio.run(main()) == "Printer 2 is fixed." and box.pieces == chunks


def test_anthropic_answer_with_a_denied_tool():
    bodies = []

    def answer(request):
        body = json.loads(request.content)
        key = request.headers.get("x-api-key") or request.headers.get("Authorization", "").removeprefix("Bearer ")
        bodies.append((request.url.path, key, body))
        if len(bodies) == 1:
            content = [{"type": "tool_use", "id": "tu1", "name": "send_email", "input": {"to": "robin@example.com"}}]
            stop = "tool_use"
        else:
            content = [{"type": "text", "text": "I did not send it."}]
            stop = "end_turn"
        return httpx2.Response(200, json={"id": "msg1", "type": "message", "role": "assistant", "model": "claude-example",
                                         "content": content, "stop_reason": stop, "stop_sequence": None,
                                         "usage": {"input_tokens": 1, "output_tokens": 1}})

    sent = []

    async def send(args):
        sent.append(args)
        return "sent"

    tool = bothy_agent.Tool("send_email", consequential=True, call=send)
    m = bothy_agent.AnthropicModel(bothy_agent.ModelConfig(base_url="https://models.example.com/v1", model="claude-example",
                                                           api_key="sk-ant-example", tools=[tool]),
                                   http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(answer)))
    # Outside a run nobody can approve: the consequential call is refused, the model told so.
    assert asyncio.run(m.answer(prompt("UNVERIFIED"))) == "I did not send it."
    assert sent == []
    path, key, first = bodies[0]
    assert path == "/v1/messages" and key == "sk-ant-example" and first["system"] == "the rules"
    assert first["messages"] == [{"role": "user", "content": "the blocks"}] and first["tools"][0]["name"] == "send_email"
    result = bodies[1][2]["messages"][-1]["content"][0]
    assert result["type"] == "tool_result" and result["tool_use_id"] == "tu1" and "not" in result["content"]
