"""``keepgoing run | runs | cancel``: start runs, list them, cancel them."""

from __future__ import annotations

import contextlib
import datetime as dt
import time
from typing import Annotated

import typer
from rich.live import Live
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from keepgoing._api.client import Client
from keepgoing._api.durations import parse_duration
from keepgoing._api.runs import WorkflowRun, WorkflowRunHandle
from keepgoing._clock import system_clock
from keepgoing._payload import dumps
from keepgoing.cli import _timeline
from keepgoing.cli._app import app
from keepgoing.cli._common import (
    JsonOption,
    StoreOption,
    TokenOption,
    UrlOption,
    add_row,
    cli_errors,
    console,
    emit_json,
    fail,
    open_client,
    parse_json,
)

_ENDED = ("completed", "failed", "cancelled", "continued", "blocked")
_REFRESH = 0.25


@app.command()
def run(
    workflow: Annotated[str, typer.Argument(help="The workflow's name.")],
    input: Annotated[
        str | None,
        typer.Option("--input", "-i", help="JSON input (parameter names to values), or @file."),
    ] = None,
    workflow_id: Annotated[str | None, typer.Option(help="Your id for the run.")] = None,
    queue: Annotated[str | None, typer.Option(help="Task queue (default: default).")] = None,
    wait: Annotated[bool, typer.Option("--wait", help="Wait, showing the steps live.")] = False,
    timeout: Annotated[
        float | None, typer.Option(help="With --wait: give up after this many seconds.")
    ] = None,
    url: UrlOption = None,
    token: TokenOption = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Start a run of WORKFLOW; with --wait, follow its steps until it ends.

    Exits 1 if the run fails, is cancelled or blocked, or --timeout passes.

    Example:

        keepgoing run score_batch -i '{"batch_id": "b-1", "rows": [1, 2, 3]}' --wait
    """
    value = parse_json(input, "--input")
    with cli_errors(), open_client(url, token, store) as client:
        handle = client.trigger_workflow(workflow, value, workflow_id=workflow_id, task_queue=queue)
        if not wait:
            if as_json:
                emit_json(handle)
            else:
                console.print(f"started {handle.workflow_id} (run {handle.run_id})")
            return
        ended = _follow(client, handle, timeout, live=not as_json)
    _report(ended, as_json)


def _follow(
    client: Client, handle: WorkflowRunHandle, timeout: float | None, *, live: bool
) -> WorkflowRun:
    """Poll the run until it ends, redrawing its steps when ``live``; then print
    the final steps once (a terminal shows them live; a pipe gets only these)."""
    deadline = None if timeout is None else system_clock.monotonic() + timeout
    table: Table | None = None
    view = Live(console=console, auto_refresh=False, transient=True) if live else None
    with view if view is not None else contextlib.nullcontext():
        while True:
            current = client.get_run(handle.workflow_id, run_id=handle.run_id)
            if view is not None:
                history = client.history(handle.workflow_id, run_id=handle.run_id)
                title = f"{handle.workflow_name} {handle.workflow_id}: {current.status}"
                table = _timeline.steps_table(_timeline.build(history), title=title)
                view.update(table, refresh=True)
            if current.status in _ENDED:
                break
            if deadline is not None and system_clock.monotonic() >= deadline:
                fail(f"run {handle.run_id} is still {current.status} after {timeout:g}s")
            time.sleep(_REFRESH)
    if table is not None:
        console.print(table)
    return current


def _report(ended: WorkflowRun, as_json: bool) -> None:
    if as_json:
        emit_json(
            {
                "workflow_id": ended.workflow_id,
                "run_id": ended.run_id,
                "status": ended.status,
                "result": ended.result,
                "error": ended.error,
            }
        )
    elif ended.status == "completed":
        console.print(f"[green]completed[/]: {escape(dumps(ended.result))}")
    else:
        reason = ended.error.message if ended.error else ended.blocked_reason or ended.status
        console.print(f"[red]{ended.status}[/]: {escape(reason)}")
    if ended.status != "completed":
        raise typer.Exit(1)


def _when(at: float | None) -> str:
    if at is None:
        return ""
    return dt.datetime.fromtimestamp(at, dt.UTC).strftime("%Y-%m-%d %H:%M:%S")


@app.command("runs")
def list_runs(
    workflow: Annotated[str | None, typer.Option(help="Only runs of this workflow.")] = None,
    status: Annotated[
        str | None,
        typer.Option(help="running, blocked, completed, failed, cancelled or continued."),
    ] = None,
    since: Annotated[
        str | None, typer.Option(help="Only runs created this long ago or less, e.g. 1h.")
    ] = None,
    limit: Annotated[int, typer.Option(min=1, max=1000, help="Page size.")] = 50,
    offset: Annotated[int, typer.Option(min=0, help="Skip this many runs.")] = 0,
    url: UrlOption = None,
    token: TokenOption = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """List runs, newest first, as a table.

    Example:

        keepgoing runs --status failed --since 1h
    """
    with cli_errors(), open_client(url, token, store) as client:
        after = None
        if since is not None:
            after = system_clock.now() - parse_duration(since, what="--since")
        runs = client.list_runs(
            workflow=workflow, status=status, limit=limit, offset=offset, created_after=after
        )
    if as_json:
        emit_json(runs)
        return
    table = Table(title=f"{len(runs)} run(s)")
    for column in ("workflow id", "workflow", "status", "run", "created (UTC)", "took"):
        table.add_column(column, overflow="fold")
    for r in runs:
        took = f"{r.ended_at - r.created_at:.2f}s" if r.ended_at is not None else ""
        style = _timeline._STYLE.get(r.status, "")
        add_row(
            table,
            r.workflow_id,
            r.workflow_name,
            Text(r.status, style=style),
            r.run_id,
            _when(r.created_at),
            took,
        )
    console.print(table)


@app.command()
def cancel(
    workflow_id: Annotated[str, typer.Argument(help="The workflow id of the run.")],
    reason: Annotated[str | None, typer.Option(help="Why; recorded in history and audit.")] = None,
    run_id: Annotated[str | None, typer.Option(help="A specific run of the workflow id.")] = None,
    url: UrlOption = None,
    token: TokenOption = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Cancel a running workflow: it sees CancelledError and its finally blocks run.

    Example:

        keepgoing cancel nightly-2026-01-01 --reason "bad input"
    """
    with cli_errors(), open_client(url, token, store) as client:
        client.cancel_workflow(workflow_id, reason, run_id=run_id)
        current = client.get_run(workflow_id, run_id=run_id)
    if as_json:
        emit_json({"workflow_id": workflow_id, "run_id": current.run_id, "status": current.status})
        return
    console.print(
        f"cancel requested for {workflow_id} (run {current.run_id}, now {current.status})"
    )
