"""Fixtures: a demo stack on real processes (SQLite, the autoscaler, local replicas)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ._stack import ProcessStack

pytestmark = pytest.mark.integration


@pytest.fixture
def stack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ProcessStack]:
    monkeypatch.setenv("KEEPGOING_USER", "reviewer-dana")
    s = ProcessStack(tmp_path)
    try:
        yield s
    finally:
        print(s.scaler_log()[-4000:])
        s.close()


@pytest.fixture
def pg_stack(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, postgres_url: str
) -> Iterator[ProcessStack]:
    """The same stack on the session's PostgreSQL database, emptied first."""
    from postgres_support import migrated, reset  # noqa: PLC0415

    reset(migrated(postgres_url))
    monkeypatch.setenv("KEEPGOING_USER", "reviewer-dana")
    s = ProcessStack(tmp_path, store=postgres_url)
    try:
        yield s
    finally:
        print(s.scaler_log()[-4000:])
        s.close()
