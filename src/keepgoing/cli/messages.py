"""``keepgoing send`` and ``keepgoing event``: messages to runs and external events."""

from __future__ import annotations

from typing import Annotated

import typer

from keepgoing.cli._app import app
from keepgoing.cli._common import (
    JsonOption,
    StoreOption,
    TokenOption,
    UrlOption,
    cli_errors,
    console,
    emit_json,
    open_client,
    parse_json,
)


@app.command()
def send(
    workflow_id: Annotated[str, typer.Argument(help="The workflow id of the running run.")],
    name: Annotated[str, typer.Argument(help="The message name the workflow waits for.")],
    payload: Annotated[
        str | None, typer.Argument(help="JSON payload (at most 256 KiB), or @file.")
    ] = None,
    run_id: Annotated[str | None, typer.Option(help="A specific run of the workflow id.")] = None,
    url: UrlOption = None,
    token: TokenOption = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Send a message to a running workflow (its wait_for_message gets it).

    The sender is set from your token (or, on the store, your login): you
    cannot choose it.

    Example:

        keepgoing send review-acct-1 review '{"approved": true}'
    """
    value = parse_json(payload, "the payload")
    with cli_errors(), open_client(url, token, store) as client:
        message_id = client.send_workflow_message(workflow_id, name, value, run_id=run_id)
    if as_json:
        emit_json({"message_id": message_id, "workflow_id": workflow_id, "name": name})
    else:
        console.print(f"sent {name!r} to {workflow_id} (message {message_id})", markup=False)


@app.command()
def event(
    event_type: Annotated[str, typer.Argument(help="The event's type, e.g. job.finished.")],
    correlation_id: Annotated[str, typer.Argument(help="Which waits it is for.")],
    payload: Annotated[str | None, typer.Argument(help="JSON payload, or @file.")] = None,
    event_id: Annotated[
        str | None, typer.Option(help="De-duplication id: publishing it again changes nothing.")
    ] = None,
    url: UrlOption = None,
    token: TokenOption = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Publish an external event to the runs waiting on its type and correlation id.

    Example:

        keepgoing event export.finished job-17 '{"rows": 1200}' --event-id job-17-done
    """
    value = parse_json(payload, "the payload")
    with cli_errors(), open_client(url, token, store) as client:
        published = client.publish_event(event_type, correlation_id, value, event_id=event_id)
    if as_json:
        emit_json({"event_id": published, "event_type": event_type})
    else:
        console.print(
            f"published {event_type} for {correlation_id} (event {published})", markup=False
        )
