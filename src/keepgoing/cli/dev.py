"""``keepgoing dev FILE.py``: a server and one worker, for local development."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Annotated

import typer

from keepgoing._procinfo import NONCE_ENV, new_nonce
from keepgoing._server.defaults import DEFAULT_PORT
from keepgoing._store.url import resolve_store_url
from keepgoing.cli._app import app
from keepgoing.cli._common import StoreOption, cli_errors, console, fail

_GRACE = 15.0


@app.command()
def dev(
    file: Annotated[Path, typer.Argument(help="The Python file that defines the workflows.")],
    store: StoreOption = None,
    port: Annotated[int, typer.Option(help="Port of the server (0 picks a free one).")] = (
        DEFAULT_PORT
    ),
    queue: Annotated[
        list[str] | None, typer.Option("--queue", "-q", help="Queue the worker serves.")
    ] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Debug logging.")] = False,
) -> None:
    """Run a server on 127.0.0.1 (no tokens needed) and one worker for FILE.

    The store defaults to the embedded SQLite file. Stop both with Ctrl-C.

    Example:

        keepgoing dev pipeline.py
    """
    if not file.is_file() or file.suffix != ".py":
        fail(f"{file} is not a Python file", 2)
    from keepgoing._server.serve import ServeOptions, run_server  # noqa: PLC0415 (slow import)

    url = resolve_store_url(store)
    argv = [sys.executable, "-m", "keepgoing.cli", "worker", str(file)]
    for name in queue or ():
        argv += ["--queue", name]
    # The store URL (and any password in it) in the environment, never on a command line
    # every local user can read; the nonce spares the worker starting itself again.
    env = {**os.environ, "KEEPGOING_STORE": url, NONCE_ENV: new_nonce()}
    worker = subprocess.Popen(argv, env=env)
    stopping, worker_gone = threading.Event(), threading.Event()
    watcher = threading.Thread(target=_watch, args=(worker, stopping, worker_gone), daemon=True)
    watcher.start()
    console.print(
        f"keepgoing dev: worker pid {worker.pid} for {file}; server on "
        f"http://127.0.0.1:{port} (authentication off); store {url}"
    )
    try:
        with cli_errors():
            run_server(
                ServeOptions(store=url, port=port, auth=False, verbose=verbose), stop=worker_gone
            )
    finally:
        stopping.set()
        _stop(worker)


def _watch(
    worker: subprocess.Popen[bytes], stopping: threading.Event, gone: threading.Event
) -> None:
    """When the worker ends (its file does not import, or Ctrl-C reached it too),
    stop the server as well."""
    code = worker.wait()
    if not stopping.is_set() and code != 0:
        console.print(f"the worker exited with {code}; stopping the server", style="red")
    gone.set()


def _stop(worker: subprocess.Popen[bytes]) -> None:
    if worker.poll() is None:
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(timeout=_GRACE)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()
