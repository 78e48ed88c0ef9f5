"""``keepgoing workers``: the registered workers, with their hung task threads."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from keepgoing._clock import system_clock
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
) -> None:
    """List the registered workers, oldest first (or: keepgoing workers kill ID).

    "hung" counts threads still running a sync task body that timed out; past
    --max-hung-threads the worker restarts itself in a fresh process.

    Example:

        keepgoing workers
    """
    if ctx.invoked_subcommand is not None:
        return
    with cli_errors(), open_client(url, token, store) as client:
        workers = client.list_workers()
    if as_json:
        emit_json(workers)
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
