"""``keepgoing run | runs | cancel``: start runs, list them, cancel them."""

from __future__ import annotations

import contextlib
import datetime as dt
import time
import warnings
from typing import Annotated, Any

import typer
from rich.live import Live
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from keepgoing._client.client import Client
from keepgoing._client.runs import WorkflowRun, WorkflowRunHandle
from keepgoing._clock import system_clock
from keepgoing._durations import parse_duration
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
    errors_console,
    fail,
    open_client,
    parse_json,
    plain,
)
from keepgoing.errors import UnknownWorkflowWarning

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
    strict: Annotated[
        bool, typer.Option("--strict", help="Refuse a name that no worker has served.")
    ] = False,
    wait: Annotated[bool, typer.Option("--wait", help="Wait, showing the steps live.")] = False,
    timeout: Annotated[
        float | None, typer.Option(help="With --wait: give up after this many seconds.")
    ] = None,
    priority: Annotated[
        int,
        typer.Option(help="Higher first; a point is worth a minute of waiting (default 0)."),
    ] = 0,
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
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", UnknownWorkflowWarning)
            handle = client.trigger_workflow(
                workflow,
                value,
                workflow_id=workflow_id,
                task_queue=queue,
                strict=strict,
                priority=priority,
            )
        for warning in caught:
            errors_console.print(f"[yellow]warning[/]: {escape(str(warning.message))}")
        if not wait:
            if as_json:
                emit_json(handle)
            else:
                verb = "found open" if handle.existing else "started"
                console.print(f"{verb} {handle.workflow_id} (run {handle.run_id})")
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


def trouble_text(run: WorkflowRun) -> str:
    """The run's markers that its status does not already say."""
    return ", ".join(m.text for m in run.markers if m.kind not in (run.state, run.status))


def run_json(run: WorkflowRun) -> dict[str, Any]:
    """A run for ``--json``: its fields, its state and its markers."""
    markers = [{"kind": m.kind, "count": m.count, "text": m.text} for m in run.markers]
    return {**plain(run), "state": run.state, "markers": markers}


def _when(at: float | None) -> str:
    if at is None:
        return ""
    return dt.datetime.fromtimestamp(at, dt.UTC).strftime("%Y-%m-%d %H:%M:%S")


runs_app = typer.Typer(invoke_without_command=True, no_args_is_help=False)
app.add_typer(runs_app, name="runs")


@runs_app.callback()
def list_runs(
    ctx: typer.Context,
    workflow: Annotated[str | None, typer.Option(help="Only runs of this workflow.")] = None,
    status: Annotated[
        str | None,
        typer.Option(
            help="One or several (comma-separated): running, blocked, completed, failed, "
            "cancelled, continued."
        ),
    ] = None,
    since: Annotated[
        str | None, typer.Option(help="Only runs created this long ago or less, e.g. 1h.")
    ] = None,
    until: Annotated[
        str | None, typer.Option(help="Only runs created more than this long ago, e.g. 10m.")
    ] = None,
    id: Annotated[
        str | None, typer.Option("--id", help="A workflow id or run id, or how it starts.")
    ] = None,
    search: Annotated[
        str | None,
        typer.Option(
            "--search",
            "-q",
            help="Text in the workflow id, run id, workflow name, blocked reason or error.",
        ),
    ] = None,
    needs_patch: Annotated[
        str | None,
        typer.Option(help="Runs in flight that have not passed keepgoing.patched(this id)."),
    ] = None,
    revision: Annotated[
        int | None, typer.Option(min=1, help="Only runs pinned to this group revision.")
    ] = None,
    trouble: Annotated[
        str | None,
        typer.Option(
            help="Only runs with each of these markers (comma-separated): worker_lost, "
            "retried, rate_limited, waiting_for_review, blocked."
        ),
    ] = None,
    limit: Annotated[int, typer.Option(min=1, max=1000, help="Page size.")] = 50,
    cursor: Annotated[
        str | None, typer.Option(help="Where to go on: the cursor a previous page printed.")
    ] = None,
    offset: Annotated[int, typer.Option(min=0, help="Skip this many runs (old paging).")] = 0,
    url: UrlOption = None,
    token: TokenOption = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """List runs, newest first, as a table, with the cursor of the next page (or:
    keepgoing runs counts, keepgoing runs unblock ID, keepgoing runs migrate ID).

    The trouble column counts what went wrong in each run ("worker lost" and how
    many times, "retried", "rate-limited"); a running run that waits for a reviewer's
    decision shows "waiting for review" as its status.

    Example:

        keepgoing runs --status failed,blocked --since 1h -q "quota"

        keepgoing runs --trouble worker_lost --since 1d

        keepgoing runs --needs-patch send-receipt
    """
    if ctx.invoked_subcommand is not None:
        return
    now = system_clock.now()
    after = now - parse_duration(since, what="--since") if since is not None else None
    before = now - parse_duration(until, what="--until") if until is not None else None
    next_cursor = None
    with cli_errors(), open_client(url, token, store) as client:
        if offset:
            if (
                cursor
                or id
                or search
                or (status and "," in status)
                or until
                or needs_patch
                or trouble
            ):
                raise typer.BadParameter("--offset pages only by --workflow, --status, --since")
            runs = client.list_runs(
                workflow=workflow, status=status, limit=limit, offset=offset, created_after=after
            )
        else:
            page = client.page_runs(
                status=status,
                workflow=workflow,
                since=after,
                until=before,
                id=id,
                text=search,
                limit=limit,
                cursor=cursor,
                needs_patch=needs_patch,
                revision=revision,
                trouble=trouble,
            )
            runs, next_cursor = page.runs, page.next_cursor
    if as_json:
        emit_json([run_json(r) for r in runs])  # a list; the next cursor goes to stderr
        if next_cursor:
            typer.echo(f"next cursor: {next_cursor}", err=True)
        return
    table = Table(title=f"{len(runs)} run(s)")
    columns = ("workflow id", "workflow", "status", "trouble", "run", "rev", "created (UTC)")
    for column in (*columns, "took"):
        table.add_column(column, overflow="fold")
    for r in runs:
        took = f"{r.ended_at - r.created_at:.2f}s" if r.ended_at is not None else ""
        style = _timeline._STYLE.get(r.state, "")
        shown = Text(r.state.replace("_", " "), style=style)
        if r.waiting_for:
            shown.append(f" ({r.waiting_for})", style="yellow")
        add_row(
            table,
            r.workflow_id,
            r.workflow_name,
            shown,
            Text(trouble_text(r), style="red"),
            r.run_id,
            "" if r.group_revision is None else str(r.group_revision),
            _when(r.created_at),
            took,
        )
    console.print(table)
    if next_cursor:
        console.print(f"more: keepgoing runs ... --cursor {next_cursor}", markup=False)


@runs_app.command("counts")
def counts(
    workflow: Annotated[str | None, typer.Option(help="Only runs of this workflow.")] = None,
    since: Annotated[
        str | None, typer.Option(help="Only runs created this long ago or less, e.g. 1h.")
    ] = None,
    id: Annotated[
        str | None, typer.Option("--id", help="A workflow id or run id, or how it starts.")
    ] = None,
    search: Annotated[
        str | None, typer.Option("--search", "-q", help="Text, as for keepgoing runs.")
    ] = None,
    url: UrlOption = None,
    token: TokenOption = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """How many runs are in each status, and how many carry each trouble marker
    (with the filters of keepgoing runs).

    Example:

        keepgoing runs counts --workflow nightly --since 1d
    """
    after = system_clock.now() - parse_duration(since, what="--since") if since else None
    with cli_errors(), open_client(url, token, store) as client:
        found = client.count_runs(workflow=workflow, since=after, id=id, text=search)
        marked = client.count_trouble(workflow=workflow, since=after, id=id, text=search)
    if as_json:
        emit_json({"counts": found, "total": sum(found.values()), "trouble": marked})
        return
    table = Table(title=f"{sum(found.values())} run(s)")
    table.add_column("status")
    table.add_column("runs", justify="right")
    for name, n in found.items():
        add_row(table, Text(name, style=_timeline._STYLE.get(name, "")), f"{n:,}")
    console.print(table)
    if any(marked.values()):
        trouble = Table(title="runs with trouble")
        trouble.add_column("marker")
        trouble.add_column("runs", justify="right")
        for name, n in marked.items():
            add_row(trouble, Text(name.replace("_", " "), style="red" if n else ""), f"{n:,}")
        console.print(trouble)


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


@runs_app.command("unblock")
def unblock(
    workflow_id: Annotated[str, typer.Argument(help="The workflow id of the blocked run.")],
    run_id: Annotated[str | None, typer.Option(help="A specific run of the workflow id.")] = None,
    url: UrlOption = None,
    token: TokenOption = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Retry a blocked run now: the next worker that serves it replays it. If its
    code replays the history the run continues; if not, it is blocked again.

    Example:

        keepgoing runs unblock nightly-2026-01-01
    """
    with cli_errors(), open_client(url, token, store) as client:
        current = client.unblock_workflow(workflow_id, run_id=run_id)
    if as_json:
        emit_json({"workflow_id": workflow_id, "run_id": current.run_id, "status": current.status})
        return
    console.print(
        f"unblocked {workflow_id} (run {current.run_id}): the next worker that serves "
        f"{current.workflow_name} retries it"
    )


@runs_app.command("migrate")
def migrate(
    workflow_id: Annotated[str, typer.Argument(help="The workflow id of the run in flight.")],
    to: Annotated[int, typer.Option("--to", min=1, help="The group revision to move it to.")],
    run_id: Annotated[str | None, typer.Option(help="A specific run of the workflow id.")] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Move it without replaying its history first.")
    ] = False,
    url: UrlOption = None,
    token: TokenOption = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Move a run in flight to another revision of its worker group. Its history is
    replayed on that revision's code first; if it would block there, nothing moves
    and the diff is shown (exit 1), unless --force.

    Example:

        keepgoing runs migrate order-17 --to 3
    """
    with cli_errors(), open_client(url, token, store) as client:
        moved = client.groups.migrate(workflow_id, to, run_id=run_id, force=force)
    if as_json:
        emit_json(moved.to_body())
        return
    checked = "" if moved.report is None else f" ({moved.report.bound()})"
    console.print(
        f"moved {workflow_id} (run {moved.run_id}) from revision {moved.from_revision} "
        f"to {moved.to_revision}{checked}",
        markup=False,
    )
