"""An image that asks for another Python than this one runs on that Python: a real
deploy in store mode, the background orchestrator's replica of the task's group built
by uv on the interpreter it finds, and the task reporting its own version."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from keepgoing._client import orchestrator as background

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

HERE = "{}.{}".format(*sys.version_info[:2])
APP = textwrap.dedent(
    """
    # /// script
    # dependencies = ["keepgoing"]
    # ///
    import json
    import sys

    from keepgoing import Image, task, workflow

    VERSION = "{version}"


    @task(image=Image.debian_slim(VERSION).pip_install("six"))
    def where() -> dict:
        import six  # only this task's environment has it

        return {{"python": sys.version.split()[0], "six": six.__version__}}


    @task
    def here() -> str:
        return sys.version.split()[0]


    @workflow
    async def versions() -> dict:
        return {{"task": await where(), "main": await here()}}


    if __name__ == "__main__":
        import keepgoing

        worker = keepgoing.deploy_workflow_worker(name="wf-versions", shutdown_delay_seconds=1)
        print(json.dumps(keepgoing.Client().trigger_workflow(
            "versions", task_queue=worker.task_queue, wait=True, timeout=240
        )))
    """
)


def _other_python() -> tuple[str, Path] | None:
    """Another CPython (3.11 or newer, not this one's minor version) on this machine:
    one uv lists, or one of pyenv's versions (whose shims uv cannot always run)."""
    roots = [Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"]
    candidates = [p / "bin" for root in roots if root.is_dir() for p in sorted(root.iterdir())]
    for folder in candidates:
        for python in sorted(folder.glob("python3.[0-9]*")):
            version = python.name.removeprefix("python")
            if not version.replace(".", "").isdigit() or version == HERE:
                continue
            if int(version.split(".")[1]) < 11:
                continue
            done = subprocess.run([python, "-c", "print(1)"], capture_output=True, check=False)
            if done.returncode == 0:
                return version, folder
    return None


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Path]:
    folder = tmp_path / "project"
    (folder / ".keepgoing").mkdir(parents=True)
    try:
        yield folder
    finally:
        url = f"sqlite:///{folder / '.keepgoing' / 'keepgoing.db'}"
        if background.find_orchestrator(url).running:
            background.stop_orchestrator(url, timeout=60)


def _env(path: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KEEPGOING_")}
    env.update(PYTHONUNBUFFERED="1", PATH=path, KEEPGOING_ORCHESTRATOR_IDLE="30")
    return env


def test_a_task_image_runs_on_the_python_it_asks_for(project: Path) -> None:
    found = _other_python()
    if found is None:
        pytest.skip(f"no CPython 3.11+ other than {HERE} on this machine")
    version, folder = found
    (project / "versions.py").write_text(APP.format(version=version))
    path = f"{folder}{os.pathsep}{os.environ.get('PATH', '')}"
    done = subprocess.run(
        [sys.executable, "versions.py"],
        cwd=project,
        env=_env(path),
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    logs = "\n".join(p.read_text() for p in (project / ".keepgoing").rglob("*.log"))
    assert done.returncode == 0, done.stderr + logs
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["task"]["python"].startswith(version + "."), result
    assert result["main"].startswith(HERE + "."), result  # the main group: this one's


def test_a_deploy_asking_for_a_python_not_found_is_refused(project: Path) -> None:
    (project / "versions.py").write_text(APP.format(version="3.98"))
    done = subprocess.run(
        [sys.executable, "versions.py"],
        cwd=project,
        env=_env(os.environ.get("PATH", "")),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode != 0
    assert "asks for Python 3.98" in done.stderr and "it finds" in done.stderr
    assert "GroupError" in done.stderr
    assert not (project / ".keepgoing" / "orchestrator").exists()  # nothing was deployed
