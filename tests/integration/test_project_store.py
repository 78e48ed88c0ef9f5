"""One store per project, with real processes: a script, a worker and the CLI started
in a subfolder, with no ``--store`` and no ``KEEPGOING_STORE``, all find the
project's ``.keepgoing/`` folder above them, and none makes one of its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ._support import wait_until

pytestmark = pytest.mark.integration

APP = textwrap.dedent(
    """
    from keepgoing import task, workflow

    @task
    def shout(word: str) -> str:
        return word.upper()

    @workflow
    async def greet(word: str) -> str:
        return await shout(word) + "!"
    """
)
TRIGGER = textwrap.dedent(
    """
    from keepgoing import Client

    with Client() as client:
        run = client.trigger_workflow("greet", {"word": "hello"}, workflow_id="greet-1")
        print(run.run_id)
    """
)
READ = textwrap.dedent(
    """
    import json
    from keepgoing import Client

    with Client() as client:
        print(json.dumps(client.result("greet-1", timeout=60)))
    """
)


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KEEPGOING_")}
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _python(cwd: Path, script: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(script)],
        cwd=cwd,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )


def _kg(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "keepgoing.cli", *args],
        cwd=cwd,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )


def test_a_subfolder_script_worker_and_cli_find_the_projects_store(tmp_path: Path) -> None:
    if any((p / ".keepgoing").is_dir() for p in tmp_path.parents):
        pytest.skip("a folder above the test's has a .keepgoing folder of its own")
    project = tmp_path / "project"
    jobs = project / "jobs" / "nightly"
    jobs.mkdir(parents=True)
    (project / "app.py").write_text(APP)
    (project / "trigger.py").write_text(TRIGGER)
    (jobs / "read.py").write_text(READ)

    # At the top, with no store anywhere: the project's folder is made here.
    started = _python(project, project / "trigger.py")
    assert started.returncode == 0, started.stderr
    store = project / ".keepgoing" / "keepgoing.db"
    assert store.is_file()

    # A worker started two folders down serves the run from the same store.
    log = open(tmp_path / "worker.log", "wb")  # noqa: SIM115 (closed below)
    worker = subprocess.Popen(
        [sys.executable, "-m", "keepgoing.cli", "worker", str(project / "app.py")],
        cwd=jobs,
        env=_env(),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        done = _python(jobs, jobs / "read.py")
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout.splitlines()[-1]) == "HELLO!"
        text = wait_until((tmp_path / "worker.log").read_text, 30, "the worker's first line")
        assert f"store sqlite:///{store}" in text
    finally:
        worker.terminate()
        worker.wait(timeout=30)
        log.close()

    # The CLI, from the subfolder: it says which store it opened, on stderr.
    listed = _kg(jobs, "runs", "--json")
    assert listed.returncode == 0, listed.stderr
    assert f"store sqlite:///{store}" in listed.stderr
    runs = json.loads(listed.stdout)
    assert [(r["workflow_id"], r["status"]) for r in runs] == [("greet-1", "completed")]
    for folder in (project / "jobs", jobs):
        assert not (folder / ".keepgoing").exists(), folder
