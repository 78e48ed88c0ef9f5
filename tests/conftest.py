"""Fixtures shared by every part of the suite."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from postgres_support import session_database


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A fresh PostgreSQL database for this test session, dropped at its end.

    Skipped with the reason when no server answers, unless ``CI=true``.
    Tests that use it empty it first (``postgres_support.reset``).
    """
    yield from session_database()
