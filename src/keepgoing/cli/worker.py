"""``keepgoing worker FILE.py``: serve a file's workflows and tasks."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from typing import Annotated

import typer

from keepgoing import _supervisor as supervisor
from keepgoing._open_store import store_from_url
from keepgoing._store.records import WorkerStop
from keepgoing._store.startup import Opening
from keepgoing._store.url import redact_url, resolve_store_url
from keepgoing._store.worker_stops import SHUTDOWN
from keepgoing._worker import process, signals
from keepgoing._worker.loader import load_file, task_queues_from_env
from keepgoing._worker.redact import install_log_redaction, install_stream_redaction
from keepgoing._worker.settings import WorkerSettings
from keepgoing._worker.worker import Worker
from keepgoing._workflow.registry import registry
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
        str | None, typer.Option(help="Store URL (default: KEEPGOING_STORE, else the project's).")
    ] = None,
    lease_ttl: Annotated[
        float | None, typer.Option(help="Seconds a lease lasts without a heartbeat.")
    ] = None,
    heartbeat: Annotated[float | None, typer.Option(help="Seconds between heartbeats.")] = None,
    shutdown_grace: Annotated[
        float | None,
        typer.Option(help="Seconds running attempts get to finish after SIGTERM (default 10)."),
    ] = None,
    connect_timeout: Annotated[
        float | None,
        typer.Option(
            envvar="KEEPGOING_CONNECT_TIMEOUT",
            min=0,
            help="Seconds to wait at start-up for an unreachable store before exiting 1 "
            "(default: wait for as long as it takes).",
            show_default=False,
        ),
    ] = None,
    max_hung_threads: Annotated[
        int | None,
        typer.Option(
            help="Sync task threads hung after their timeout before the worker restarts "
            "itself in a fresh process (default 8)."
        ),
    ] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Debug logging.")] = False,
) -> None:
    """Run a worker for FILE's workflows and tasks until SIGTERM or Ctrl-C.

    A store that cannot be reached yet (a database starting up or failing over) is
    waited for, with backoff; a wrong password or a missing database fails at once.

    Example:

        keepgoing worker pipeline.py --queue default --concurrency 8
    """
    # Before anything else: the nonce a kill proves this process by (``_worker/process.py``).
    process.ensure_nonce()
    install_stream_redaction()
    setup_logging(verbose)
    install_log_redaction()
    try:
        supervisor.supervisor_pid()  # a bad KEEPGOING_SUPERVISOR_PID stops it here, named
    except ValueError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    try:
        registry.task_queues.update(task_queues_from_env())
        module = load_file(file)  # before touching the store: a bad file writes nothing
        settings = WorkerSettings.from_env(
            queues=tuple(queue or ("default",)),
            concurrency=concurrency,
            lease_ttl=lease_ttl,
            heartbeat_interval=heartbeat,
            shutdown_grace=shutdown_grace,
            max_hung_threads=max_hung_threads,
        )
        store = resolve_store_url(store)
        the_store = store_from_url(store)
    except KeepgoingError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    typer.echo(f"store {redact_url(store)}", err=True)
    the_worker = Worker(the_store, settings=settings)
    the_worker.replace_when_hung = True
    the_worker.capture_logs = True
    the_worker.killable = True
    log.info(
        "worker %s serving %s from %s on %s (queues: %s)",
        the_worker.worker_id,
        module.__name__,
        file,
        redact_url(store),
        ", ".join(settings.queues),
    )
    try:
        asyncio.run(_serve(the_worker, connect_timeout))
    except StoreError as exc:  # the store cannot be opened (or stayed away too long)
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    if the_worker.replace:
        # Hung threads cannot be ended but with their process: the same command line
        # starts again in this process's place (same pid), as a new worker.
        log.warning("worker %s restarting in a fresh process", the_worker.worker_id)
        logging.shutdown()
        process.renew_nonce()
        os.execv(sys.executable, sys.orig_argv)
    if the_worker.abandoned_threads or the_worker.hung_threads:
        # Released attempts still run in threads that cannot be interrupted; their
        # steps now belong to other workers, so this process must not linger.
        logging.shutdown()
        os._exit(0)


async def _serve(the_worker: Worker, connect_timeout: float | None) -> None:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()

    def request_stop(signum: int) -> None:
        stop.set()
        # Who sent it decides what the attempts it hands back count against.
        reason = signals.stop_for(the_worker.worker_id, signum, signals.taken())
        if not the_worker.stopping:
            log.info("worker %s stopping: %s", the_worker.worker_id, reason.detail)
        the_worker.request_stop(reason)

    def supervisor_gone() -> None:
        stop.set()
        if not the_worker.stopping:
            log.info(
                "worker %s stopping: the process that started it is gone", the_worker.worker_id
            )
        the_worker.request_stop(
            WorkerStop(
                the_worker.worker_id,
                SHUTDOWN,
                via="worker",
                detail="the process that started it (its server or group) is gone",
            )
        )

    signals.watch()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, request_stop, sig)
    unwatch = supervisor.watch(loop, supervisor_gone)
    try:
        if not await Opening(the_worker.store, timeout=connect_timeout).wait(stop):
            log.info("worker %s stopped before the store was reachable", the_worker.worker_id)
            return
        await the_worker.run()
    finally:
        unwatch()
        await the_worker.store.close()
    log.info("worker %s stopped", the_worker.worker_id)
