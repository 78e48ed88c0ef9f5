"""Record the support-digest run that the UI's *Replay a recorded run* opens first.

    python -m keepgoing._demo.record        # or: make record-demo

It runs the real demo stack in a temporary folder (the short mode: 16 tickets),
kills the agent's worker in the middle of a step through the kill API, waits for
the run to finish on a fresh worker, checks the evidence, and writes the run's
history, exactly as the store holds it, to
``keepgoing/_server/ui/static/recordings/support-digest.history.json``, with this
machine's folders in its tracebacks replaced by ``demo/`` and ``site-packages/``.
The file is never edited by hand: re-run this to re-record it.

:func:`stale_fields` says what the shipped recording lacks that the current build
writes for the same events (a loss's cause, say): the tests compare it with a live
run of the same scenario and with events the current store writes, so a change of
what the build records fails them until the run is recorded again.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path

import keepgoing
from keepgoing._demo.digest import KILL_STEP, deploy_agent, evidence, kill_mid_run, start_run
from keepgoing._demo.files import agent_file
from keepgoing._demo.stack import LocalStack
from keepgoing._history import events as ev
from keepgoing._history.codec import dumps_history, encode, loads_history

__all__ = ["OUTPUT", "agent_version", "kind", "record", "recorded", "stale_fields"]

OUTPUT = (
    Path(__file__).resolve().parents[1]
    / "_server"
    / "ui"
    / "static"
    / "recordings"
    / "support-digest.history.json"
)


def record(output: Path = OUTPUT, *, say: object = print) -> int:
    """Record one run into ``output``; the number of events written."""
    show = say if callable(say) else print
    with (
        tempfile.TemporaryDirectory(prefix="keepgoing-record-") as tmp,
        LocalStack(Path(tmp), fast=True) as stack,
    ):
        worker = deploy_agent(stack)
        workflow_id = start_run(stack, worker, "week-42")
        killed = kill_mid_run(stack, workflow_id)
        show(f"killed {killed} during {KILL_STEP}")
        stack.client.result(workflow_id, timeout=300)
        found = evidence(stack, workflow_id, killed)
        for line in found.lines:
            show(f"  {line}")
        if not found.ok:
            raise SystemExit("the evidence did not hold: nothing written")
        events = stack.client.history(workflow_id)
        text = _scrubbed(dumps_history(events), Path(tmp))
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(text, encoding="utf-8")
    show(f"wrote {len(events)} events of {workflow_id} to {output}")
    return len(events)


def recorded(path: Path = OUTPUT) -> list[ev.Event]:
    """The shipped recording's events."""
    return loads_history(path.read_text(encoding="utf-8"))


def agent_version() -> str:
    """The code version the current agent's file records (as ``code_version`` hashes it)."""
    return hashlib.sha256(agent_file().read_bytes()).hexdigest()[:12]


def kind(event: ev.Event) -> str:
    """An event's type, with its ``reason`` when it has one: ``TaskAttemptFailed(worker_lost)``."""
    reason = getattr(event, "reason", None)
    return f"{type(event).__name__}({reason})" if reason else type(event).__name__


def stale_fields(shipped: Iterable[ev.Event], fresh: Iterable[ev.Event]) -> list[str]:
    """What ``shipped`` lacks that the current build wrote in ``fresh`` (events of the
    same scenario): a kind of event it has none of, or a field the build writes on
    every event of a kind that some shipped event of that kind does not have."""
    have: dict[str, list[set[str]]] = {}
    for event in shipped:
        have.setdefault(kind(event), []).append(set(encode(event)))
    wrote: dict[str, list[set[str]]] = {}
    for event in fresh:
        wrote.setdefault(kind(event), []).append(set(encode(event)))
    problems = []
    for name, bodies in sorted(wrote.items()):
        if name not in have:
            problems.append(f"the recording has no {name} event")
            continue
        always = set.intersection(*bodies)
        for fields in have[name]:
            missing = sorted(always - fields)
            if missing:
                problems.append(f"a {name} event of the recording lacks {', '.join(missing)}")
                break
    return problems


def _scrubbed(text: str, folder: Path) -> str:
    """The history without this machine's paths: the tracebacks of failed attempts name
    files under the demo's temporary folder and keepgoing's install folder."""
    package = Path(keepgoing.__file__).resolve().parent.parent
    for path, shown in ((folder.resolve(), "demo"), (folder, "demo"), (package, "site-packages")):
        text = text.replace(json.dumps(str(path))[1:-1], shown)
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--output", type=Path, default=OUTPUT)
    args = parser.parse_args(argv)
    record(args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
