"""Fixtures for the start-up tests: a throwaway cluster, processes that are always reaped."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from chaos._lab import postgres_bin
from integration._support import WorkerProcess

from ._cluster import Cluster

APP = Path(__file__).parent.parent / "chaos" / "apps" / "five_steps.py"


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    if postgres_bin() is None:
        reason = "PostgreSQL's server programs (initdb, pg_ctl) are not installed"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true and the start-up tests cannot run: {reason}", pytrace=False)
        pytest.skip(reason)
    made = Cluster()
    try:
        made.create()
        yield made
    finally:
        print(f"----- postgres log -----\n{made.postgres_log()[-3000:]}")
        made.close()


class Processes:
    """``keepgoing`` subprocesses of one test, SIGKILLed and reported at teardown."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("KEEPGOING_")}
        self.env["PYTHONUNBUFFERED"] = "1"
        self.started: list[WorkerProcess] = []

    def start(self, *args: str, name: str = "kg", argv0: list[str] | None = None) -> WorkerProcess:
        import sys  # noqa: PLC0415

        argv = [*(argv0 or []), sys.executable, "-m", "keepgoing.cli", *args]
        proc = WorkerProcess(f"{name}{len(self.started)}", argv, self.root, self.env)
        self.started.append(proc)
        return proc


@pytest.fixture
def procs(tmp_path: Path) -> Iterator[Processes]:
    made = Processes(tmp_path)
    try:
        yield made
    finally:
        for proc in made.started:
            proc.reap()
            print(proc.report())


@pytest.fixture
def app(tmp_path: Path) -> Path:
    target = tmp_path / APP.name
    target.write_text(APP.read_text())
    return target
