"""``keepgoing audit``: who sent, published, cancelled, triggered and changed tokens."""

from __future__ import annotations

import datetime as dt
from typing import Annotated

import typer
from rich.table import Table

from keepgoing._payload import dumps
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


@app.command()
def audit(
    action: Annotated[
        str | None,
        typer.Option(
            help="Only this action, e.g. message.send, event.publish, run.cancel, "
            "workflow.trigger, token.create, token.revoke."
        ),
    ] = None,
    workflow_id: Annotated[
        str | None, typer.Option(help="Only entries about this workflow.")
    ] = None,
    limit: Annotated[int, typer.Option(min=1, max=1000, help="How many entries.")] = 50,
    url: UrlOption = None,
    token: TokenOption = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """List the audit log, newest first, each entry with its actor.

    Example:

        keepgoing audit --action message.send --limit 20
    """
    with cli_errors(), open_client(url, token, store) as client:
        entries = client.list_audit(limit=limit, action=action, workflow_id=workflow_id)
    if as_json:
        emit_json(entries)
        return
    table = Table(title=f"audit log ({len(entries)} entries)")
    for column in ("when (UTC)", "actor", "action", "workflow", "detail"):
        table.add_column(column, overflow="fold")
    for e in entries:
        when = dt.datetime.fromtimestamp(e.at, dt.UTC).strftime("%Y-%m-%d %H:%M:%S")
        add_row(
            table,
            when,
            f"{e.actor_kind}:{e.actor_id}",
            e.action,
            e.workflow_id or "",
            dumps(e.detail),
        )
    console.print(table)
