"""Fixtures for unit tests: simulated runs, and runs on a SQLite store driven in threads."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import keepgoing

from ._messaging_support import Runs
from ._sim import Sim


@pytest.fixture
def make_sim() -> Iterator[Callable[..., Sim]]:
    """``make_sim(fn, *args, **kwargs)``: a :class:`Sim`, closed after the test."""
    made: list[Sim] = []

    def make(fn: Any, *args: Any, **kwargs: Any) -> Sim:
        sim = Sim(fn, *args, **kwargs)
        made.append(sim)
        return sim

    yield make
    for sim in made:
        sim.close()


@pytest.fixture
def url(tmp_path: Path) -> str:
    """A SQLite store file of this test."""
    return "sqlite:///" + str(tmp_path / "kg.db")


@pytest.fixture
def client(url: str) -> Iterator[keepgoing.Client]:
    with keepgoing.Client(store=url) as c:
        yield c


@pytest.fixture
def runs(url: str) -> Iterator[Runs]:
    made = Runs(url)
    try:
        yield made
    finally:
        made.close()
