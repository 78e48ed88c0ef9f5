"""The chaos suite's lab: a throwaway PostgreSQL cluster and, where allowed, network namespaces."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from ._lab import Lab, postgres_bin

WORKERS = 4


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Lab]:
    if postgres_bin() is None:
        reason = "PostgreSQL's server programs (initdb, pg_ctl) are not installed"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true and the chaos tests cannot run: {reason}", pytrace=False)
        pytest.skip(reason)
    made = Lab(WORKERS)
    try:
        made.start()
        print(f"lab: {made.isolation}; database at {made.hosts[0].store_url} (worker 1's view)")
        yield made
    finally:
        print(f"----- postgres log -----\n{made.postgres_log()[-4000:]}")
        made.close()
