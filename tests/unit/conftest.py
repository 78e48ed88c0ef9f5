"""Fixtures for runtime unit tests: simulated runs that are always closed."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

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
