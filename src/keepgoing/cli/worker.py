"""``keepgoing worker FILE.py``: serve a file's workflows and tasks."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from typing import Annotated

import typer

from keepgoing._store.url import redact_url, resolve_store_url, store_from_url
from keepgoing._worker.loader import load_file
from keepgoing._worker.settings import WorkerSettings
from keepgoing._worker.worker import Worker
from keepgoing.cli._app import app, setup_logging
from keepgoing.errors import KeepgoingError, StoreError

log = logging.getLogger("keepgoing.worker")


@app.command()
def worker(
    file: Annotated[str, typer.Argument(help="The Python file that defines the workflows.")],
    queue: Annotated[
        list[str] | None, typer.Option("--queue", "-q", help="Task queue to serve (repeatable).")
    ] = None,
    concurrency: Annotated[int, typer.Option(help="Task attempts run at once.")] = 16,
    store: Annotated[
        str | None, typer.Option(help="Store URL (default: KEEPGOING_STORE or the local SQLite).")
    ] = None,
    lease_ttl: Annotated[
        float | None, typer.Option(help="Seconds a lease lasts without a heartbeat.")
    ] = None,
    heartbeat: Annotated[float | None, typer.Option(help="Seconds between heartbeats.")] = None,
    shutdown_grace: Annotated[
        float | None,
        typer.Option(help="Seconds running attempts get to finish after SIGTERM (default 10)."),
    ] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Debug logging.")] = False,
) -> None:
    """Run a worker for FILE's workflows and tasks until SIGTERM or Ctrl-C.

    Example:

        keepgoing worker pipeline.py --queue default --concurrency 8
    """
    setup_logging(verbose)
    try:
        module = load_file(file)  # before touching the store: a bad file writes nothing
        settings = WorkerSettings.from_env(
            queues=tuple(queue or ("default",)),
            concurrency=concurrency,
            lease_ttl=lease_ttl,
            heartbeat_interval=heartbeat,
            shutdown_grace=shutdown_grace,
        )
        the_store = store_from_url(store)
    except KeepgoingError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    the_worker = Worker(the_store, settings=settings)
    log.info(
        "worker %s serving %s from %s on %s (queues: %s)",
        the_worker.worker_id,
        module.__name__,
        file,
        redact_url(resolve_store_url(store)),
        ", ".join(settings.queues),
    )
    try:
        asyncio.run(_serve(the_worker))
    except StoreError as exc:  # the store cannot be opened (or stayed away too long)
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    if the_worker.abandoned_threads:
        # Released attempts still run in threads that cannot be interrupted; their
        # steps now belong to other workers, so this process must not linger.
        logging.shutdown()
        os._exit(0)


async def _serve(the_worker: Worker) -> None:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, the_worker.request_stop)
    try:
        await the_worker.run()
    finally:
        await the_worker.store.close()
    log.info("worker %s stopped", the_worker.worker_id)
