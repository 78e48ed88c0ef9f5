"""docs/migrating.md: every keepgoing program in it runs as it stands, in an empty
folder, with nothing else started (a deploy starts the store's background
orchestrator); every program shown for another system is valid Python."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from keepgoing._client import orchestrator as background

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

DOC = Path(__file__).resolve().parents[2] / "docs" / "migrating.md"
_BLOCK = re.compile(r"<!-- (before|after): ([a-z-]+) -->\n```python\n(.*?)\n```", re.S)


def _blocks(kind: str) -> dict[str, str]:
    return {name: code for k, name, code in _BLOCK.findall(DOC.read_text()) if k == kind}


def test_every_system_has_a_before_and_an_after() -> None:
    assert set(_blocks("before")) == set(_blocks("after")) == {"chalk", "temporal", "dbos"}
    # Every python block of the page is one of them: none is left unrun.
    assert DOC.read_text().count("```python") == len(_BLOCK.findall(DOC.read_text()))


@pytest.mark.parametrize("name", sorted(_blocks("before")))
def test_the_program_for_the_other_system_is_valid_python(name: str) -> None:
    ast.parse(_blocks("before")[name])


@pytest.mark.parametrize("name", sorted(_blocks("after")))
def test_the_keepgoing_program_runs(name: str, tmp_path: Path) -> None:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "example.py").write_text(_blocks("after")[name] + "\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("KEEPGOING_")}
    env.update(
        PYTHONUNBUFFERED="1",
        KEEPGOING_ORCHESTRATOR_IDLE="30",
        XDG_CONFIG_HOME=str(tmp_path / "config"),  # the secrets' key file, if one is made
    )
    try:
        done = subprocess.run(
            [sys.executable, "example.py"],
            cwd=folder,
            env=env,
            capture_output=True,
            text=True,
            timeout=280,
            check=False,
        )
    finally:
        url = f"sqlite:///{folder / '.keepgoing' / 'keepgoing.db'}"
        if background.find_orchestrator(url).running:
            background.stop_orchestrator(url, timeout=60)
    logs = "\n".join(p.read_text() for p in folder.rglob("*.log"))
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}\n{logs}"
    assert "Warning" not in done.stderr, done.stderr  # no UnknownQueueWarning, no other
