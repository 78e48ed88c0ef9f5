"""What the use cases share: their workflow files, journals, waiting, and reading steps back.

Evidence comes from real records only: each task's journal line (one per
execution of its body, written by the task itself), the run's history and
steps as the checkpoint inspector derives them, the side services' own logs,
and the store's audit log and group decisions.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from keepgoing._client.client import Client
from keepgoing._demo.usecases.base import DemoStack
from keepgoing._views.steps import StepView, build_steps

__all__ = [
    "FLOWS",
    "Facts",
    "executions",
    "journal_path",
    "only_step",
    "read_journal",
    "run_id_of",
    "short_id",
    "step_env",
    "steps_of",
    "wait_for",
]

#: The use cases' workflow files. ``examples/`` holds the one copy of each; a wheel ships
#: them as ``keepgoing/_demo/usecases/flows/`` (hatch ``force-include``), and a checkout
#: (an editable install) finds them in the repository's ``examples/``.
_PACKAGED = Path(__file__).resolve().parent / "flows"
_CHECKOUT = Path(__file__).resolve().parents[4] / "examples"
FLOWS = _PACKAGED if (_PACKAGED / "crm_sync.py").is_file() else _CHECKOUT
T = TypeVar("T")


def short_id(prefix: str) -> str:
    """A workflow or job id for one start of a scenario: ``TKT-2418-3fa9c1``."""
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def journal_path(stack: DemoStack, key: str) -> Path:
    return stack.workdir / f"{key.lower()}.journal.jsonl"


def step_env(stack: DemoStack, key: str) -> dict[str, str]:
    """The env a use case's group runs with: its journal, and how long slow steps take."""
    return {
        "DEMO_JOURNAL": str(journal_path(stack, key)),
        "DEMO_STEP_SECONDS": "0.5" if stack.fast else "4",
    }


def read_journal(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


def executions(path: Path, step: str, key: str | None = None) -> list[dict[str, Any]]:
    """The journal lines of ``step`` (for ``key``): one per execution of its body."""
    return [e for e in read_journal(path) if e["step"] == step and (key is None or e["key"] == key)]


def wait_for(predicate: Callable[[], T | None], timeout: float, what: str) -> T:
    """``predicate()``'s first truthy value, polled until ``timeout`` seconds pass."""
    deadline = time.monotonic() + timeout
    pause = 0.01
    while True:
        found = predicate()
        if found:
            return found
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(pause)
        pause = min(pause * 2, 0.25)


def run_id_of(client: Client, workflow_id: str) -> str:
    return client.get_run(workflow_id).run_id


def steps_of(client: Client, workflow_id: str) -> dict[str, list[StepView]]:
    """The run's steps by task name, as the checkpoint inspector shows them."""
    run_id = run_id_of(client, workflow_id)
    kills = client.list_audit(action="worker.kill", limit=1000)
    found: dict[str, list[StepView]] = {}
    for step in build_steps(run_id, client.history(workflow_id, run_id=run_id), (), kills):
        found.setdefault(step.name, []).append(step)
    return found


def only_step(steps: dict[str, list[StepView]], name: str) -> StepView | None:
    """The one step called ``name``, or None when there is none (or more than one)."""
    found = steps.get(name) or []
    return found[0] if len(found) == 1 else None


class Facts:
    """Evidence lines and whether each held."""

    def __init__(self, out: Callable[[str], None]) -> None:
        self.lines: list[str] = []
        self.ok = True
        self._out = out

    def check(self, held: bool, line: str) -> None:
        text = line if held else f"NOT AS EXPECTED: {line}"
        self.ok = self.ok and held
        self.lines.append(text)
        self._out(f"  {'✓' if held else '✗'} {line}")

    def note(self, line: str) -> None:
        self._out(f"  {line}")
