"""Fixtures: one server, one worker and an admin token shared by a test module."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from ._support import Stack

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """A server (JSON logs) and a worker for ``apps/service_app.py`` on one SQLite store."""
    s = Stack(tmp_path_factory.mktemp("stack"))
    try:
        s.admin = s.token("root", "admin")
        s.start_server("--log-json")
        s.start_worker()
        yield s
    finally:
        s.cleanup()


@pytest.fixture
def admin(stack: Stack) -> Iterator[httpx.Client]:
    with stack.api(stack.admin) as client:
        yield client
