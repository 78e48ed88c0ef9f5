"""A replica's tie to the process that started it (``keepgoing._supervisor``)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from integration._support import wait_until
from keepgoing import _supervisor as supervisor

pytestmark = pytest.mark.timeout(30)


def test_the_pid_is_read_from_the_environment() -> None:
    assert supervisor.supervisor_pid({}) is None
    assert supervisor.supervisor_pid({supervisor.ENV: " "}) is None
    assert supervisor.supervisor_pid({supervisor.ENV: "4242"}) == 4242


@pytest.mark.parametrize("text", ["abc", "-5", "1", "0", "12.5"])
def test_a_bad_pid_is_refused_by_name(text: str) -> None:
    with pytest.raises(ValueError, match=supervisor.ENV) as caught:
        supervisor.supervisor_pid({supervisor.ENV: text})
    assert repr(text) in str(caught.value)


def test_without_a_supervisor_nothing_is_watched(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(supervisor.ENV, raising=False)
    gone: list[bool] = []

    async def main() -> None:
        unwatch = supervisor.watch(asyncio.get_running_loop(), lambda: gone.append(True))
        await asyncio.sleep(0)
        unwatch()

    asyncio.run(main())
    assert gone == []


def test_a_supervisor_that_is_not_the_parent_counts_as_gone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The named process is not this one's parent: the worker was re-parented, so
    # whatever started it is gone already.
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        monkeypatch.setenv(supervisor.ENV, str(child.pid))

        async def main() -> bool:
            done = asyncio.Event()
            supervisor.watch(asyncio.get_running_loop(), done.set)
            await asyncio.wait_for(done.wait(), 10)
            return done.is_set()

        assert asyncio.run(main())
    finally:
        child.kill()
        child.wait()


CHILD = """
import asyncio, os, sys
from pathlib import Path
from keepgoing import _supervisor as supervisor
out = Path(sys.argv[1])

async def main():
    done = asyncio.Event()
    supervisor.watch(asyncio.get_running_loop(), done.set)
    out.write_text("watching")
    await asyncio.wait_for(done.wait(), 20)
    out.write_text("gone")

asyncio.run(main())
"""

PARENT = """
import os, subprocess, sys, time
env = dict(os.environ, KEEPGOING_SUPERVISOR_PID=str(os.getpid()))
subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[2]], env=env, start_new_session=True)
while True:
    time.sleep(1)
"""


def test_the_watch_fires_when_the_parent_is_killed(tmp_path: Path) -> None:
    out = tmp_path / "state"
    parent = subprocess.Popen([sys.executable, "-c", PARENT, textwrap.dedent(CHILD), str(out)])
    try:
        wait_until(lambda: out.exists() and out.read_text() == "watching", 20, "the child to watch")
    finally:
        parent.kill()  # SIGKILL: the parent gets no chance to stop its child
        parent.wait()
    wait_until(lambda: out.read_text() == "gone", 20, "the child to see its parent gone")


def test_the_worker_refuses_a_bad_supervisor_pid_by_name(tmp_path: Path) -> None:
    app = tmp_path / "app.py"
    app.write_text("")
    env = {**os.environ, supervisor.ENV: "not-a-pid"}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "keepgoing.cli",
            "worker",
            str(app),
            "--store",
            "sqlite:///:memory:",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=25,
        check=False,
    )
    assert done.returncode == 2
    assert "KEEPGOING_SUPERVISOR_PID must be the pid" in done.stderr
    assert "'not-a-pid'" in done.stderr
