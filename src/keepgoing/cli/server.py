"""``keepgoing server``: the HTTP API plus the orchestrator services."""

from __future__ import annotations

from typing import Annotated

import typer

from keepgoing._server.defaults import DEFAULT_HOST, DEFAULT_MAX_BODY, DEFAULT_PORT
from keepgoing.cli._app import app
from keepgoing.cli._common import StoreOption, cli_errors


@app.command()
def server(
    store: StoreOption = None,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = DEFAULT_HOST,
    port: Annotated[int, typer.Option(help="Port to listen on (0 picks a free one).")] = (
        DEFAULT_PORT
    ),
    no_auth: Annotated[
        bool,
        typer.Option(
            "--no-auth",
            help="Accept calls without a token (as 'anonymous'). Only allowed on loopback.",
        ),
    ] = False,
    log_json: Annotated[
        bool, typer.Option("--log-json", help="Log one JSON object per line.")
    ] = False,
    max_body: Annotated[
        int, typer.Option(help="Largest request body in bytes (413 above).", min=1024)
    ] = DEFAULT_MAX_BODY,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Debug logging.")] = False,
) -> None:
    """Serve the HTTP API (OpenAPI at /openapi.json) and fire timers and reap leases.

    Several servers may share one store: each timer fires once and each expired
    lease is reaped once. Every call but /healthz needs a token; create the
    first one with `keepgoing token create`.

    Example:

        keepgoing server --store sqlite:///runs.db --port 8711
    """
    from keepgoing._server.serve import ServeOptions, run_server  # noqa: PLC0415 (slow import)

    with cli_errors():
        run_server(
            ServeOptions(
                store=store,
                host=host,
                port=port,
                auth=not no_auth,
                log_json=log_json,
                verbose=verbose,
                max_body=max_body,
            )
        )
