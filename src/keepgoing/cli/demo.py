"""``keepgoing demo``: the support-digest agent, its recorded run and the use cases.

Interactive (what ``make demo`` runs): the server with the UI, the agent's group
on the local backend and a live run; the demo page at ``/demo``. ``--headless``
runs the same scenarios without a browser and exits non-zero when the evidence
does not hold (what CI runs).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Annotated

import typer

from keepgoing._store.url import redact_url
from keepgoing.cli._app import app
from keepgoing.cli._common import cli_errors, console


@app.command()
def demo(
    headless: Annotated[
        bool, typer.Option(help="Run the scenarios without a browser, print the evidence.")
    ] = False,
    fast: Annotated[
        bool, typer.Option(help="The short CI mode: 16 tickets and 1 s waits (under 30 s).")
    ] = False,
    folder: Annotated[
        Path, typer.Option(help="Where the demo keeps its store, group files and logs.")
    ] = Path(".keepgoing/demo"),
    store: Annotated[
        str | None,
        typer.Option(
            envvar="KEEPGOING_STORE",
            help="A store URL (default: SQLite in --folder); postgresql://... works too.",
        ),
    ] = None,
    port: Annotated[int, typer.Option(help="The server's port (0 picks a free one).")] = 8711,
    open_browser: Annotated[
        bool, typer.Option("--open/--no-open", help="Open the demo page in a browser.")
    ] = True,
    keep: Annotated[
        bool, typer.Option(help="Keep the folder's earlier runs and memory (default: afresh).")
    ] = False,
) -> None:
    """Kill the worker. The agent keeps going.

    Example:

        keepgoing demo                       # the page at http://127.0.0.1:8711/demo
        keepgoing demo --headless --fast     # CI: kill a worker mid-step, print the evidence
    """
    from keepgoing._demo import live  # noqa: PLC0415 (the server's imports are slow)
    from keepgoing._demo.headless import run_headless  # noqa: PLC0415
    from keepgoing._demo.stack import LocalStack  # noqa: PLC0415

    folder = folder.resolve()
    if not keep and store is None:
        shutil.rmtree(folder, ignore_errors=True)
    with cli_errors():
        if headless:
            stack = LocalStack(folder, store=store, fast=fast, port=0)
            console.print(f"keepgoing demo (headless) — store {redact_url(stack.store_url)}")
            with stack:
                ok = run_headless(stack, lambda line: console.print(line, markup=False))
            if not ok:
                raise typer.Exit(1)
            return
        live.run_interactive(folder, store=store, fast=fast, port=port, open_browser=open_browser)
