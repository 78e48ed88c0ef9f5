"""Cassettes: record answers once, replay them with nothing sent off the machine."""

from __future__ import annotations

from pathlib import Path

import pytest

from keepgoing._gateway.cassette import Cassette
from keepgoing._gateway.config import load_config
from keepgoing._gateway.ledger import Caller
from keepgoing._gateway.service import Gateway
from keepgoing.errors import CassetteMissError, ConfigurationError

from ._fakes import Fake
from ._support import OPENAI_KEY, config_text

HELLO = [{"role": "user", "content": "What is the capital of France?"}]


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fakes: tuple[Fake, Fake]) -> Path:
    path = tmp_path / "keepgoing.toml"
    path.write_text(config_text(*fakes))
    monkeypatch.setenv("FAKE_OPENAI_KEY", OPENAI_KEY)
    return path


async def _chat(gateway: Gateway, stream: bool = False, messages: list | None = None) -> str:
    body = {"model": "gpt", "messages": messages or HELLO}
    if not stream:
        answer, _ = await gateway.chat(body, Caller())
        return str(answer["choices"][0]["message"]["content"])
    events = await gateway.stream({**body, "stream": True}, Caller())
    return b"".join([e async for e in events]).decode()


async def test_record_then_replay_sends_nothing(
    tmp_path: Path, config: Path, fakes: tuple[Fake, Fake]
) -> None:
    fake_openai, _ = fakes
    tape = tmp_path / "tape.json"
    recorder = Gateway(load_config(config), None, cassette=Cassette(tape, "record"))
    recorded = await _chat(recorder)
    recorded_stream = await _chat(recorder, stream=True)
    await recorder.aclose()
    assert len(fake_openai.requests) == 2
    assert OPENAI_KEY not in tape.read_text()

    fake_openai.plan("500", "500")  # the provider is down: replay must not notice
    player = Gateway(load_config(config), None, cassette=Cassette(tape, "replay"))
    assert await _chat(player) == recorded
    assert await _chat(player, stream=True) == recorded_stream
    assert len(fake_openai.requests) == 2
    with pytest.raises(CassetteMissError, match="no recording of this call to 'gpt'"):
        await _chat(player, messages=[{"role": "user", "content": "something new"}])
    await player.aclose()


def test_the_mode_follows_the_file_and_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tape = tmp_path / "tape.json"
    monkeypatch.setenv("KEEPGOING_GATEWAY_CASSETTE", str(tape))
    cassette = Cassette.from_env()
    assert cassette is not None and cassette.mode == "record"
    monkeypatch.setenv("KEEPGOING_GATEWAY_CASSETTE_MODE", "replay")
    with pytest.raises(ConfigurationError, match="does not exist"):
        Cassette.from_env()
    monkeypatch.setenv("KEEPGOING_GATEWAY_CASSETTE_MODE", "sometimes")
    with pytest.raises(ConfigurationError, match="replay or record"):
        Cassette.from_env()
    tape.write_text("not json")
    monkeypatch.delenv("KEEPGOING_GATEWAY_CASSETTE_MODE")
    with pytest.raises(ConfigurationError, match="cannot be read"):
        Cassette.from_env()
