"""``keepgoing show``: a run's timeline in the terminal."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from keepgoing._history import events as ev
from keepgoing.cli import _timeline
from keepgoing.cli._app import app
from keepgoing.cli._common import (
    JsonOption,
    StoreOption,
    TokenOption,
    UrlOption,
    cli_errors,
    console,
    emit_json,
    open_client,
)
from keepgoing.cli.runs import run_json


@app.command()
def show(
    workflow_id: Annotated[str, typer.Argument(help="The workflow id of the run.")],
    run_id: Annotated[str | None, typer.Option(help="A specific run of the workflow id.")] = None,
    logs: Annotated[
        bool, typer.Option("--logs", help="Also print what each attempt printed and logged.")
    ] = False,
    step: Annotated[
        int | None, typer.Option(min=1, help="With --logs: only this step (its cmd).")
    ] = None,
    url: UrlOption = None,
    token: TokenOption = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show a run as a timeline: each step with its attempts, worker, duration,
    retries and errors; timers; messages and events.

    Example:

        keepgoing show score-b-1
    """
    attempt_logs: list[dict[str, Any]] = []
    with cli_errors(), open_client(url, token, store) as client:
        run = client.get_run(workflow_id, run_id=run_id)
        history = client.history(workflow_id, run_id=run.run_id)
        if logs:
            attempt_logs = client.attempt_logs(workflow_id, run_id=run.run_id, cmd=step)
    timeline = _timeline.build(history)
    for version in run.code_versions:
        timeline.saw_version(version)
    timeline.waiting_for = run.waiting_for or ""
    patches = sorted({e.change_id for e in history if isinstance(e, ev.PatchMarked)})
    if as_json:
        extra = {"logs": attempt_logs} if logs else {}
        body = {
            "run": run_json(run),
            "timeline": _timeline.as_json(timeline),
            "patches": patches,
            **extra,
        }
        emit_json(body)
        return
    console.print(_timeline.render(timeline))
    if run.markers:
        console.print(
            f"{run.state.replace('_', ' ')}; trouble: {', '.join(m.text for m in run.markers)}",
            markup=False,
        )
    if run.group_revision is not None or patches:
        revision = "—" if run.group_revision is None else str(run.group_revision)
        console.print(
            f"group revision {revision}; patches passed: {', '.join(patches) or 'none'}",
            markup=False,
        )
    if logs:
        _print_logs(timeline, attempt_logs)


def _print_logs(timeline: _timeline.Timeline, found: list[dict[str, Any]]) -> None:
    names = {cmd: s.name for cmd, s in timeline.steps.items()}
    if not found:
        console.print("no attempt logs stored for this run")
    for entry in found:
        cut = " (cut at 64 KiB)" if entry["truncated"] else ""
        console.rule(
            f"step {entry['cmd']} {names.get(entry['cmd'], '')} · attempt {entry['attempt']} · "
            f"{entry['worker_id']} · {entry['size']:,} bytes{cut}",
            style="dim",
        )
        # As text, never as markup: a task's output is not ours to interpret.
        console.out(entry["text"].rstrip("\n") or "(nothing printed)", highlight=False)
