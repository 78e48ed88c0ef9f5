"""``keepgoing workers``: the registered workers, with their hung task threads."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from keepgoing._clock import system_clock
from keepgoing._store.records import WorkerRecord
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
    open_client,
)

workers_app = typer.Typer(invoke_without_command=True, no_args_is_help=False)
app.add_typer(workers_app, name="workers")


@workers_app.callback()
def list_workers(
    ctx: typer.Context,
    url: UrlOption = None,
    token: TokenOption = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
    lost: Annotated[
        bool, typer.Option("--lost", help="With --json: the lost workers too.")
    ] = False,
) -> None:
    """List the live workers, oldest first, then those lost in the last day, with
    when and why (or: keepgoing workers kill ID).

    "hung" counts threads still running a sync task body that timed out; past
    --max-hung-threads the worker restarts itself in a fresh process. A worker
    is lost once its process ended or its heartbeat stopped past its deadline;
    it serves nothing and counts in no queue.

    Example:

        keepgoing workers
    """
    if ctx.invoked_subcommand is not None:
        return
    with cli_errors(), open_client(url, token, store) as client:
        everyone = client.list_workers(include_lost=True)
    workers = [w for w in everyone if w.lost_at is None]
    gone = sorted((w for w in everyone if w.lost_at is not None), key=lambda w: -(w.lost_at or 0))
    if as_json:
        emit_json([*workers, *gone] if lost else workers)
        return
    now = system_clock.now()
    table = Table(title=f"{len(workers)} worker(s)")
    for column in ("worker", "host", "pid", "queues", "concurrency", "hung", "heartbeat"):
        table.add_column(column, overflow="fold")
    for w in workers:
        hung = int(w.info.get("hung_threads", 0) or 0)
        add_row(
            table,
            w.worker_id,
            w.host,
            str(w.pid),
            ", ".join(w.queues),
            str(w.info.get("concurrency", "")),
            Text(str(hung), style="red" if hung else ""),
            f"{max(0.0, now - w.heartbeat_at):.1f}s ago",
        )
    console.print(table)
    if gone:
        console.print(_lost_table(gone, now))


def _lost_table(gone: list[WorkerRecord], now: float) -> Table:
    table = Table(title=f"{len(gone)} lost worker(s), last day")
    for column in ("worker", "host", "pid", "queues", "lost", "why"):
        table.add_column(column, overflow="fold")
    for w in gone:
        add_row(
            table,
            w.worker_id,
            w.host,
            str(w.pid),
            ", ".join(w.queues),
            f"{max(0.0, now - (w.lost_at or now)):.0f}s ago",
            Text(w.lost_reason or "", style="red"),
        )
    return table


@workers_app.command("kill")
def kill(
    worker_id: Annotated[str, typer.Argument(help="The worker id (see keepgoing workers).")],
    url: UrlOption = None,
    token: TokenOption = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """SIGKILL a plain `keepgoing worker` on the server's machine (with --store: on
    this machine), after checking that its registered pid is still that worker. Its
    attempts are retried on other workers. Needs `workers.kill` or `admin`; audited.

    Example:

        keepgoing workers kill vm-4242-1a2b3c
    """
    with cli_errors(), open_client(url, token, store) as client:
        killed = client.kill_worker(worker_id, via="cli")
    if as_json:
        emit_json(killed)
        return
    console.print(f"sent SIGKILL to worker {worker_id} (pid {killed['pid']} on {killed['host']})")
