"""``keepgoing server``: the HTTP API plus the orchestrator services."""

from __future__ import annotations

from typing import Annotated

import typer

from keepgoing._server.defaults import (
    DEFAULT_HOST,
    DEFAULT_LONG_POLL_MAX,
    DEFAULT_MAX_BODY,
    DEFAULT_PORT,
    DEFAULT_SESSION_IDLE,
    DEFAULT_SESSION_LIFETIME,
    DEFAULT_STREAM_MAX,
)
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
    long_poll_max: Annotated[
        float,
        typer.Option(
            min=0.1,
            max=60,
            help="Longest a result long poll (GET .../result) waits, in seconds; lower it "
            "below the idle timeout of a proxy in front of the server.",
        ),
    ] = DEFAULT_LONG_POLL_MAX,
    stream_max: Annotated[
        float,
        typer.Option(
            min=0.1,
            max=86_400,
            help="Longest an event stream (GET .../stream) stays open, in seconds; a "
            "browser's EventSource reconnects and resumes where it was.",
        ),
    ] = DEFAULT_STREAM_MAX,
    connect_timeout: Annotated[
        float | None,
        typer.Option(
            envvar="KEEPGOING_CONNECT_TIMEOUT",
            min=0,
            help="Seconds to wait at start-up for an unreachable store before exiting 1 "
            "(default: wait, answering 503 on /readyz, for as long as it takes).",
            show_default=False,
        ),
    ] = None,
    config: Annotated[
        str | None,
        typer.Option(
            envvar="KEEPGOING_CONFIG",
            help="keepgoing.toml with the model gateway's [gateway] table (default: "
            "./keepgoing.toml if it exists, else only the scripted model).",
            show_default=False,
        ),
    ] = None,
    session_idle: Annotated[
        float,
        typer.Option(min=60, help="Seconds a web UI session may go unused before it ends."),
    ] = DEFAULT_SESSION_IDLE,
    session_lifetime: Annotated[
        float,
        typer.Option(min=60, help="Seconds a web UI session lasts after signing in."),
    ] = DEFAULT_SESSION_LIFETIME,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Debug logging.")] = False,
) -> None:
    """Serve the HTTP API (OpenAPI at /openapi.json) and fire timers and reap leases.

    Several servers may share one store: each timer fires once and each expired
    lease is reaped once. Every call but /healthz and /readyz needs a token; create the
    first one with `keepgoing token create`.

    A store that cannot be reached yet is waited for while the server listens:
    /healthz answers 200 and /readyz 503 until the store is open, then 200.

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
                long_poll_max=long_poll_max,
                stream_max=stream_max,
                connect_timeout=connect_timeout,
                gateway_config=config,
                session_idle=session_idle,
                session_lifetime=session_lifetime,
            )
        )
