"""Record the golden histories in this directory from real runs.

    python tests/golden/record.py              # every file
    python tests/golden/record.py fan_out      # only fan_out.json

Each run goes through the real engine and a real SQLite store
(``Client.run_workflow``); the history is written with the history codec.
The Trap 1 interleaving (DESIGN section 10) cannot be forced in a real run,
so ``race.json`` is written out by hand. Re-record a file only when a change is
meant to break the histories it holds, and leave the others alone: files recorded
by older versions are what prove old histories still replay.
``tests/unit/_runtime/test_golden.py`` replays every file.
"""

from __future__ import annotations

import dataclasses
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(HERE))

import workflows  # noqa: E402

import keepgoing  # noqa: E402
from keepgoing._history import events as ev  # noqa: E402
from keepgoing._history.codec import dumps_history  # noqa: E402


def record(client: keepgoing.Client, wf: Any, inputs: Any, workflow_id: str) -> list[ev.Event]:
    result = client.run_workflow(wf, inputs, workflow_id=workflow_id)
    print(f"{workflow_id}: {result!r}")
    return client.history(workflow_id)


def scrub(history: list[ev.Event]) -> list[ev.Event]:
    """Drop what is particular to this machine: worker ids and absolute paths in tracebacks."""
    workers: dict[str, str] = {}
    clean: list[ev.Event] = []
    for event in history:
        changes: dict[str, Any] = {}
        worker = getattr(event, "worker", "")
        if worker:
            changes["worker"] = workers.setdefault(worker, f"worker-{len(workers) + 1}")
        error = getattr(event, "error", None)
        if isinstance(error, ev.ErrorInfo) and error.traceback:
            text = error.traceback.replace(str(REPO), "<repo>")
            text = text.replace(sys.base_prefix, "<python>")
            changes["error"] = dataclasses.replace(error, traceback=text)
        clean.append(dataclasses.replace(event, **changes))
    return clean


def race_history() -> list[ev.Event]:
    """b's result (seq 6) is appended while the activation that saw up to seq 5 runs."""
    t0 = 1_767_225_600.0
    names = {1: "golden.first", 2: "golden.second", 3: "golden.third"}
    return [
        ev.WorkflowStarted(
            seq=1,
            at=t0,
            workflow_name="golden.race",
            workflow_id="golden-race",
            run_id="0f5e2bd1c8a44f0e9d7b3a61c2e4f789",
            input={"args": [], "kwargs": {}},
            code_version="hand-built",
        ),
        ev.ActivationCompleted(seq=2, at=t0, saw_upto=1, time=t0, worker="w1"),
        ev.TaskScheduled(seq=3, at=t0, cmd=1, name=names[1], timeout=600.0),
        ev.TaskScheduled(seq=4, at=t0, cmd=2, name=names[2], timeout=600.0),
        ev.TaskCompleted(seq=5, at=t0 + 1, cmd=1, result="first", attempt=1, worker="w1"),
        ev.TaskCompleted(seq=6, at=t0 + 2, cmd=2, result="second", attempt=1, worker="w2"),
        ev.ActivationCompleted(seq=7, at=t0 + 2, saw_upto=5, time=t0 + 1, worker="w1"),
        ev.TaskScheduled(seq=8, at=t0 + 2, cmd=3, name=names[3], timeout=600.0),
        ev.ActivationCompleted(seq=9, at=t0 + 3, saw_upto=6, time=t0 + 2, worker="w1"),
        ev.TaskCompleted(seq=10, at=t0 + 4, cmd=3, result="third", attempt=1, worker="w1"),
        ev.ActivationCompleted(seq=11, at=t0 + 4, saw_upto=10, time=t0 + 4, worker="w1"),
        ev.WorkflowCompleted(seq=12, at=t0 + 4, result=["first", "second", "third"]),
    ]


def main(only: list[str]) -> None:
    histories: dict[str, list[ev.Event]] = {}
    with (
        tempfile.TemporaryDirectory() as tmp,
        keepgoing.Client(store=f"sqlite:///{tmp}/golden.db") as client,
    ):
        histories["score_batch"] = record(
            client, workflows.score_batch, {"batch_id": "b-1", "rows": [2, 4, 6]}, "golden-1"
        )
        histories["fan_out"] = record(client, workflows.fan_out, {"n": 3}, "golden-2")
        histories["retry_then_recover"] = record(
            client, workflows.retry_then_recover, {"reason": "bad row"}, "golden-3"
        )
    histories["race"] = race_history()
    unknown = set(only) - set(histories)
    if unknown:
        raise SystemExit(f"no golden history named {sorted(unknown)}; known: {sorted(histories)}")
    for stem, history in histories.items():
        if only and stem not in only:
            continue
        path = HERE / f"{stem}.json"
        path.write_text(dumps_history(scrub(history)), encoding="utf-8")
        print(f"wrote {path} ({len(history)} events)")


if __name__ == "__main__":
    main(sys.argv[1:])
