"""Fixtures for the CLI tests: a live server and worker, and a way to run ``keepgoing``."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from server._support import Stack, cli_env

Kg = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    s = Stack(tmp_path_factory.mktemp("cli"))
    try:
        s.admin = s.token("root", "admin")
        s.start_server()
        s.start_worker()
        yield s
    finally:
        s.cleanup()


def run_kg(root: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """``keepgoing *args`` in ``root``; its output is printed so a failing test shows it."""
    done = subprocess.run(
        [sys.executable, "-m", "keepgoing.cli", *args],
        cwd=root,
        env={**cli_env(root), "COLUMNS": "200"},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    print(f"$ keepgoing {' '.join(args)}\n[exit {done.returncode}]\n{done.stdout}{done.stderr}")
    return done


@pytest.fixture
def kg(stack: Stack) -> Kg:
    """Run a command against the live server with the admin token."""

    def call(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return run_kg(
            stack.root, *args, "--url", stack.url, "--token", stack.admin, timeout=timeout
        )

    return call
