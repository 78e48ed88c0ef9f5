"""``keepgoing history export``: a run's history as JSON (for replay tests and CI)."""

from __future__ import annotations

import json
from collections.abc import Collection
from pathlib import Path
from typing import Annotated, Any

import typer

from keepgoing._client.client import Client
from keepgoing._history.codec import dumps_history, encode
from keepgoing.cli._app import app
from keepgoing.cli._common import (
    StoreOption,
    TokenOption,
    UrlOption,
    cli_errors,
    console,
    fail,
    open_client,
)

history_app = typer.Typer(help="Export run histories.", no_args_is_help=True)
app.add_typer(history_app, name="history")


_MAX_RUNNING = 10000


def running_histories(
    client: Client,
    *,
    group: str | None = None,
    names: Collection[str] | None = None,
    limit: int = _MAX_RUNNING,
) -> list[dict[str, Any]]:
    """The runs in flight (running or blocked), newest first, each with its history:
    the body of ``keepgoing history export --running``."""
    queue = None if group is None else f"workflows.{group}"
    out: list[dict[str, Any]] = []
    cursor = None
    while len(out) < limit:
        page = client.page_runs(status="running,blocked", cursor=cursor, limit=200)
        for run in page.runs:
            if (names is not None and run.workflow_name not in names) or (
                queue is not None and run.task_queue != queue
            ):
                continue
            events = client.history(run.workflow_id, run_id=run.run_id)
            out.append(
                {
                    "run_id": run.run_id,
                    "workflow_id": run.workflow_id,
                    "workflow_name": run.workflow_name,
                    "task_queue": run.task_queue,
                    "group_revision": run.group_revision,
                    "status": run.status,
                    "created_at": run.created_at,
                    "events": [encode(e) for e in events],
                }
            )
        cursor = page.next_cursor
        if cursor is None:
            break
    return out[:limit]


@history_app.command("export")
def export(
    workflow_id: Annotated[
        str | None, typer.Argument(help="The workflow id of the run (not with --running).")
    ] = None,
    run_id: Annotated[str | None, typer.Option(help="A specific run of the workflow id.")] = None,
    running: Annotated[
        bool,
        typer.Option(
            "--running", help="Every run in flight, for `keepgoing replay --against-store`."
        ),
    ] = False,
    group: Annotated[
        str | None, typer.Option(help="With --running: only the runs of this worker group.")
    ] = None,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write here instead of stdout.")
    ] = None,
    url: UrlOption = None,
    token: TokenOption = None,
    store: StoreOption = None,
) -> None:
    """Export a run's history as JSON ({"events": [...]}), the format of golden
    files and of `keepgoing replay`; with --running, every run in flight
    ({"runs": [{run_id, workflow_name, ..., events}]}).

    Example:

        keepgoing history export score-b-1 -o tests/golden/score_b_1.json

        keepgoing history export --running -o running.json
    """
    if running == (workflow_id is not None):
        fail("give a WORKFLOW_ID, or --running", 2)
    with cli_errors(), open_client(url, token, store) as client:
        if running:
            runs = running_histories(client, group=group)
        else:
            assert workflow_id is not None
            events = client.history(workflow_id, run_id=run_id)
    if running:
        text = json.dumps({"runs": runs}, ensure_ascii=False) + "\n"
        if output is None:
            typer.echo(text, nl=False)
            return
        try:
            output.write_text(text, encoding="utf-8")
        except OSError as exc:
            fail(f"cannot write {output}: {exc.strerror}")
        console.print(f"wrote {len(runs)} run(s) in flight to {output}", markup=False)
        return
    text = dumps_history(events)
    if output is None:
        typer.echo(text, nl=False)
        return
    try:
        output.write_text(text, encoding="utf-8")
    except OSError as exc:
        fail(f"cannot write {output}: {exc.strerror}")
    console.print(f"wrote {len(events)} events of {workflow_id} to {output}", markup=False)
