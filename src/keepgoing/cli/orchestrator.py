"""``keepgoing orchestrator status | stop | run``: the background orchestrator of a store.

A deploy or a trigger in store mode starts one when nothing else scales the store
(see ``keepgoing._client.orchestrator``); these commands show it, end it, or run
one in the foreground.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer

from keepgoing._client import orchestrator as background
from keepgoing._clock import system_clock
from keepgoing._groups.autoscaler import SERVICE
from keepgoing._open_store import store_from_url
from keepgoing.cli._app import app, setup_logging
from keepgoing.cli._common import (
    JsonOption,
    StoreOption,
    announce_store,
    cli_errors,
    console,
    emit_json,
)

__all__ = ["orchestrator_app"]

orchestrator_app = typer.Typer(
    help="The background orchestrator that deploys and triggers start in store mode.",
    no_args_is_help=True,
)
app.add_typer(orchestrator_app, name="orchestrator")

FolderOption = Annotated[
    Path | None,
    typer.Option("--folder", help="Where its files are (default: beside the store).", hidden=True),
]


def _holder(url: str) -> str | None:
    async def read() -> str | None:
        store = store_from_url(url)
        await store.open()
        try:
            return await store.service_holder(SERVICE, system_clock.now())
        finally:
            await store.close()

    return asyncio.run(read())


@orchestrator_app.command("status")
def status(store: StoreOption = None, as_json: JsonOption = False) -> None:
    """Whether a background orchestrator runs for the store, and who scales its groups.

    Example:

        keepgoing orchestrator status
    """
    with cli_errors():
        url = announce_store(store)
        found = background.find_orchestrator(url)
        holder = _holder(url)
    body = {
        "running": found.running,
        "pid": found.pid,
        "store": found.store,
        "log": str(found.log),
        "started_at": found.started_at,
        "idle_seconds": found.idle_seconds,
        "autoscaler": holder,
    }
    if as_json:
        emit_json(body)
        return
    if found.running:
        console.print(
            f"background orchestrator running: pid {found.pid or '?'}, stops after "
            f"{found.idle_seconds or background.DEFAULT_IDLE:g}s with no work; log {found.log}"
        )
    else:
        console.print("no background orchestrator runs for this store")
    console.print(f"autoscaler lease: {holder or 'nobody holds it'}")


@orchestrator_app.command("stop")
def stop(
    store: StoreOption = None,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for it to end.")] = 60.0,
) -> None:
    """End the store's background orchestrator (its replicas stop with it).

    Example:

        keepgoing orchestrator stop
    """
    with cli_errors():
        url = announce_store(store)
        stopped = background.stop_orchestrator(url, timeout=timeout)
    console.print(
        "background orchestrator stopped" if stopped else "no background orchestrator was running"
    )


@orchestrator_app.command("run")
def run(
    store: StoreOption = None,
    idle: Annotated[
        float | None, typer.Option(help="Stop after this many seconds with no work.")
    ] = None,
    folder: FolderOption = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Debug logging.")] = False,
) -> None:
    """Run the autoscaler and the orchestrator services on a store until it has had no
    work for the idle stretch (what a deploy starts in the background).

    Example:

        keepgoing orchestrator run --idle 600
    """
    setup_logging(verbose)
    with cli_errors():
        url = announce_store(store)
        the_store = store_from_url(url)

        async def serve() -> int:
            await the_store.open()
            try:
                return await background.serve_in_background(
                    the_store, url, folder=folder, idle=idle
                )
            finally:
                await the_store.close()

        code = asyncio.run(serve())
    if code:
        console.print("a background orchestrator already runs for this store")
