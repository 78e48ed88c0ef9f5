"""``python -m keepgoing._worker.replayer FILE``: replay histories against FILE's code.

The deploy's replay check (:mod:`keepgoing._groups.replaycheck`) runs this in a
subprocess with the *new* source, so the deploying process never imports it.
Protocol, one JSON object per line:

* out, first: ``{"ready": [workflow names]}``, or ``{"import_error": text}`` and exit 3;
* in: ``{"run_id": ..., "events": [encoded events], "strict_args": bool}`` per run,
  then end of input (``strict_args``: a step must also be scheduled with the
  arguments it recorded, the check of a fork's reused prefix under a new input);
* out, per run: ``{"run_id": ..., "ok": bool, "error": text or null}``.

A workflow the file does not define is a failure of that run (its history
cannot continue on this code), not of the check.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any

from keepgoing._history import events as ev
from keepgoing._history.codec import decode
from keepgoing._runtime.instance import WorkflowInstance
from keepgoing._runtime.prefix import EVERYTHING
from keepgoing._worker.loader import load_file
from keepgoing._workflow.registry import registry
from keepgoing.errors import KeepgoingError, NondeterminismError

__all__ = ["main", "replay_one"]


def replay_one(events: Sequence[ev.Event], *, strict_args: bool = False) -> str | None:
    """None if the registered code replays ``events``; else why not (the diff)."""
    started = next((e for e in events if isinstance(e, ev.WorkflowStarted)), None)
    if started is None:
        return "the history has no WorkflowStarted event"
    definition = registry.workflows.get(started.workflow_name)
    if definition is None:
        known = ", ".join(sorted(registry.workflows)) or "none"
        return f"the new code defines no workflow {started.workflow_name!r} (it has: {known})"
    instance = WorkflowInstance(
        definition.fn,
        run_id=started.run_id,
        workflow_id=started.workflow_id,
        workflow_name=started.workflow_name,
    )
    if strict_args:  # every step is reused: the run's own rule (``_runtime/prefix.py``)
        instance.reused = EVERYTHING
    try:
        instance.activate(events)
    except NondeterminismError as exc:
        return str(exc)
    finally:
        instance.close()
    return None


_OUT = sys.stdout  # the protocol's channel; what user code prints goes to stderr


def _answer(body: dict[str, Any]) -> None:
    _OUT.write(json.dumps(body) + "\n")
    _OUT.flush()


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m keepgoing._worker.replayer FILE", file=sys.stderr)
        return 2
    sys.stdout = sys.stderr
    try:
        load_file(argv[0])
    except (KeepgoingError, Exception) as exc:  # the new code does not import
        _answer({"import_error": f"{type(exc).__name__}: {exc}"})
        return 3
    _answer({"ready": sorted(registry.workflows)})
    for line in sys.stdin:
        if not line.strip():
            continue
        body = json.loads(line)
        try:
            error = replay_one(
                [decode(e) for e in body["events"]], strict_args=bool(body.get("strict_args"))
            )
        except Exception as exc:  # a history this code cannot even read
            error = f"{type(exc).__name__}: {exc}"
        _answer({"run_id": body["run_id"], "ok": error is None, "error": error})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
