"""Fixtures shared by every part of the suite."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from postgres_support import session_database

# The suite's tests start the autoscalers they need (a server, `groups serve`, the demo's
# stack); a deploy or trigger must not start a background orchestrator beside them. The
# tests of the background orchestrator turn it back on in the processes they start.
os.environ.setdefault("KEEPGOING_ORCHESTRATOR", "off")


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A fresh PostgreSQL database for this test session, dropped at its end.

    Skipped with the reason when no server answers, unless ``CI=true``.
    Tests that use it empty it first (``postgres_support.reset``).
    """
    yield from session_database()
