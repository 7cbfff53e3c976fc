"""Configuration from the environment and the refusals of bad settings."""

import httpx2
import pytest

import bothy_agent
from bothy_agent.client import check_server


def test_config_from_env(monkeypatch):
    monkeypatch.setenv("BOTHY_SERVER", "https://chat.example.com")
    monkeypatch.setenv("BOTHY_AGENT_TOKEN", "bothy_a_alex")
    cfg = bothy_agent.Config.from_env(once=True)
    assert (cfg.server, cfg.token, cfg.once, cfg.transport) == ("https://chat.example.com", "bothy_a_alex", True, "auto")


def test_model_config_from_env(monkeypatch):
    monkeypatch.setenv("BOTHY_MODEL_BASE_URL", "https://models.example.com/v1")
    monkeypatch.setenv("BOTHY_MODEL_API_KEY", "sk-example")
    monkeypatch.setenv("BOTHY_MODEL_NAME", "example-model")
    m = bothy_agent.ModelConfig.from_env(stream=True)
    assert (m.base_url, m.api_key, m.model, m.stream) == ("https://models.example.com/v1", "sk-example", "example-model", True)


def test_tools_from_env(monkeypatch, tmp_path):
    monkeypatch.delenv("BOTHY_TOOLS", raising=False)
    assert bothy_agent.tools_from_env() == []
    f = tmp_path / "tools.yaml"
    f.write_text("tools:\n  - name: search_wiki\n    url: https://wiki.example.com/hooks/search\n")
    monkeypatch.setenv("BOTHY_TOOLS", str(f))
    assert [t.name for t in bothy_agent.tools_from_env()] == ["search_wiki"]


@pytest.mark.parametrize("bad", ["", "chat.example.com", "ftp://chat.example.com", "https://sam:pw@chat.example.com",
                                 "https://chat.example.com/?a=1"])
def test_server_url_refused(bad):
    with pytest.raises(ValueError):
        check_server(bad)


def test_holder_is_fresh_and_valid():
    a, b = bothy_agent.new_holder(), bothy_agent.new_holder()
    assert a != b and a.startswith("adapter-") and len(a) == len("adapter-") + 16


def test_run_needs_a_token():
    with pytest.raises(ValueError):
        import asyncio

        asyncio.run(bothy_agent.arun(bothy_agent.Config(server="https://chat.example.com"), None))  # type: ignore[arg-type]


def test_model_from_env(monkeypatch):
    monkeypatch.setenv("BOTHY_MODEL_BASE_URL", "https://models.example.com/v1")
    monkeypatch.setenv("BOTHY_MODEL_NAME", "example-model")
    monkeypatch.delenv("BOTHY_MODEL", raising=False)
    # A client of the libraries' own HTTP package, so that no TLS setup is made.
    http = httpx2.AsyncClient(transport=httpx2.MockTransport(lambda r: httpx2.Response(500)))
    assert isinstance(bothy_agent.model_from_env(http), bothy_agent.OpenAIModel)
    monkeypatch.setenv("BOTHY_MODEL", "anthropic")
    assert isinstance(bothy_agent.model_from_env(http, stream=True), bothy_agent.AnthropicModel)
    monkeypatch.setenv("BOTHY_MODEL", "echo")
    with pytest.raises(ValueError):
        bothy_agent.model_from_env()


def test_server_times_with_nanoseconds():
    from datetime import datetime, timezone

    from bothy_agent.types import parse_time

    assert parse_time("2026-01-02T03:04:05.123456789Z") == datetime(2026, 1, 2, 3, 4, 5, 123456, tzinfo=timezone.utc)
    assert parse_time("2026-01-02T03:04:05.12Z") == datetime(2026, 1, 2, 3, 4, 5, 120000, tzinfo=timezone.utc)
    assert parse_time("2026-01-02T03:04:05Z") == datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
