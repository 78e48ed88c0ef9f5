"""Fixtures: the fake providers (one per session) and a gateway server per module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ._fakes import Fake
from ._support import GatewayStack


@pytest.fixture(scope="session")
def fake_openai() -> Iterator[Fake]:
    fake = Fake("openai").start()
    yield fake
    fake.stop()


@pytest.fixture(scope="session")
def fake_anthropic() -> Iterator[Fake]:
    fake = Fake("anthropic").start()
    yield fake
    fake.stop()


@pytest.fixture
def fakes(fake_openai: Fake, fake_anthropic: Fake) -> Iterator[tuple[Fake, Fake]]:
    fake_openai.reset()
    fake_anthropic.reset()
    yield fake_openai, fake_anthropic
    fake_openai.reset()
    fake_anthropic.reset()


@pytest.fixture(scope="module")
def gateway_stack(
    tmp_path_factory: pytest.TempPathFactory, fake_openai: Fake, fake_anthropic: Fake
) -> Iterator[GatewayStack]:
    stack = GatewayStack(tmp_path_factory.mktemp("gateway"), fake_openai, fake_anthropic)
    try:
        stack.start_server()
        yield stack
    finally:
        stack.cleanup()
