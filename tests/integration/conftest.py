"""Fixtures for the integration suite; the helpers they hand out live in ``_support``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import keepgoing

from ._support import Sandbox, Workers


@pytest.fixture(params=["sqlite", "postgresql"])
def kg(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Sandbox]:
    """The test's sandbox, on each store backend in turn."""
    url = None
    if request.param == "postgresql":
        from postgres_support import migrated, reset  # noqa: PLC0415

        url = migrated(request.getfixturevalue("postgres_url"))
        reset(url)
    sandbox = Sandbox(tmp_path, url)
    yield sandbox
    log = sandbox.effects_dir / "effects.log"
    if log.exists():
        print(f"----- side effects ({log}) -----\n{log.read_text()}")


@pytest.fixture
def workers(kg: Sandbox, client: keepgoing.Client) -> Iterator[Workers]:
    pool = Workers(kg, client)
    try:
        yield pool
    finally:
        pool.cleanup()


@pytest.fixture
def client(kg: Sandbox) -> Iterator[keepgoing.Client]:
    c = keepgoing.Client(store=kg.url)
    try:
        yield c
    finally:
        c.close()
