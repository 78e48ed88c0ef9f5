"""``keepgoing demo``: kill a worker mid-step and watch the workflow keep going."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from keepgoing._api.client import Client
from keepgoing._demo import quickstart
from keepgoing._history import events as ev
from keepgoing.cli._app import app

TICKETS = ["FH-1041", "FH-1042", "FH-1043", "FH-1044"]


@dataclass
class StepReport:
    name: str
    starts: list[tuple[float, int, int]] = field(default_factory=list)  # (time, pid, attempt)
    done: int = 0
    failures: list[str] = field(default_factory=list)


@app.command()
def demo(
    folder: Annotated[
        Path, typer.Option(help="Where the demo keeps its SQLite store and logs.")
    ] = Path(".keepgoing/demo"),
) -> None:
    """Run the quickstart on embedded SQLite, SIGKILL its worker mid-step, recover.

    Example:

        keepgoing demo
    """
    console = Console()
    folder = folder.resolve()
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    url = f"sqlite:///{folder / 'demo.db'}"
    env = {**os.environ, "KEEPGOING_DEMO_DIR": str(folder), "PYTHONUNBUFFERED": "1"}
    app_file = str(Path(quickstart.__file__).resolve())
    journal = folder / "journal.log"
    console.print(f"[bold]keepgoing demo[/] — store [cyan]{url}[/]\n")
    first = _start_worker(app_file, url, env, folder / "worker-1.log")
    second: subprocess.Popen[bytes] | None = None
    try:
        with Client(store=url) as client:
            _wait(lambda: bool(client.list_workers()), 60, "worker A to start")
            handle = client.trigger_workflow(
                "support_digest", {"run_key": "week-42", "ticket_ids": TICKETS}
            )
            console.print(f"1. worker A (pid {first.pid}) started; triggered {handle.workflow_id}")
            _wait(lambda: "start draft_digest" in _read(journal), 60, "draft_digest to start")
            first.send_signal(signal.SIGKILL)
            killed_at = time.time()
            first.wait()
            console.print("2. [red]SIGKILL[/] worker A in the middle of draft_digest")
            second = _start_worker(app_file, url, env, folder / "worker-2.log")
            console.print(f"3. worker B (pid {second.pid}) started")
            result = client.result(handle, timeout=120)
            console.print(f"4. the run finished: [green]{result}[/]\n")
            history = client.history(handle.workflow_id)
        ok = _report(console, journal, history, killed_at, {first.pid: "A", second.pid: "B"})
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    proc.kill()
    if not ok:
        raise typer.Exit(1)


def _start_worker(
    app_file: str, url: str, env: dict[str, str], log: Path
) -> subprocess.Popen[bytes]:
    with open(log, "wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "keepgoing.cli", "worker", app_file, "--store", url],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ""


def _wait(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise typer.Exit(f"timed out waiting for {what}")  # type: ignore[arg-type]
        time.sleep(0.02)


def _steps(journal: Path) -> dict[str, StepReport]:
    steps: dict[str, StepReport] = {}
    for line in _read(journal).splitlines():
        stamp, pid, kind, name, attempt = line.split(" ")
        step = steps.setdefault(name, StepReport(name))
        if kind == "start":
            step.starts.append((float(stamp), int(pid), int(attempt)))
        else:
            step.done += 1
    return steps


def _report(
    console: Console,
    journal: Path,
    history: list[ev.Event],
    killed_at: float,
    names: dict[int, str],
) -> bool:
    steps = _steps(journal)
    for event in history:
        if isinstance(event, ev.TaskAttemptFailed):
            key = next((n for n in steps if n.split(":")[0] == event.name), event.name)
            steps.setdefault(key, StepReport(key)).failures.append(event.reason)
    table = Table(title="How the run finished")
    for column in ("step", "ran", "attempts", "worker", "outcome"):
        table.add_column(column)
    ok = True
    for step in steps.values():
        workers = ", ".join(names.get(pid, str(pid)) for _, pid, _ in step.starts)
        retried = len(step.starts) > 1
        outcome = "retried after worker_lost" if retried else "ran once"
        if step.done != 1:
            ok, outcome = False, f"[red]completed {step.done} times[/]"
        table.add_row(step.name, str(step.done), str(len(step.starts)), workers, outcome)
    console.print(table)
    retried_steps = [s for s in steps.values() if len(s.starts) > 1]
    once = [s.name for s in steps.values() if len(s.starts) == 1 and s.done == 1]
    console.print(f"\nCompleted steps that never ran again: {', '.join(once)}")
    for step in retried_steps:
        later = [t for t, _, _ in step.starts if t > killed_at]
        if later:
            console.print(
                f"Retried step: {step.name} — its new attempt started "
                f"[bold]{later[0] - killed_at:.2f} s[/] after the SIGKILL "
                "(a fresh worker's start-up plus the lease running out)."
            )
    fired = sum(isinstance(e, ev.TimerFired) for e in history)
    console.print(f"Durable timers fired: {fired}; history events: {len(history)}")
    if ok and retried_steps:
        console.print("\n[bold green]Kill the worker. The workflow keeps going.[/]")
    elif not retried_steps:
        ok = False
        console.print("[red]no step was retried: the kill did not land mid-step[/]")
    return ok
