"""``keepgoing operation``, ``reviews`` and ``review``: operation status and the review queue."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.table import Table

from keepgoing._views.operations import DECISIONS, Operation
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
    fail,
    open_client,
    parse_json,
)


def _show(found: Operation) -> None:
    console.print(f"{found.operation_id}  {found.status}", markup=False)
    console.print(
        f"  run {found.run_id} of {found.workflow_id} ({found.run_status}), "
        f"task {found.task}, steps {', '.join(map(str, found.rounds))}, "
        f"{found.attempts} attempt(s)",
        markup=False,
    )
    if found.status == "completed":
        console.print(f"  result: {json.dumps(found.result)}", markup=False)
    if found.error is not None:
        console.print(f"  error: {found.error['type']}: {found.error['message']}", markup=False)
    if found.waiting_for_review:
        console.print(
            "  waiting for review: keepgoing review <id> approve|retry|fail", markup=False
        )
    elif found.abandoned_at is not None:
        console.print(
            "  the workflow stopped waiting for a review: no decision reaches it", markup=False
        )
    for r in found.reviews:
        why = f" ({r['reason']})" if r["reason"] else ""
        console.print(
            f"  reviewed: {r['decision']} by {r['sender_kind']}:{r['sender_id']}{why}",
            markup=False,
        )


@app.command()
def operation(
    operation_id: Annotated[str, typer.Argument(help="An id operation_id() returned in a task.")],
    url: UrlOption = None,
    token: TokenOption = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show an operation's status: pending, running, uncertain, completed, failed, cancelled.

    Example:

        keepgoing operation op-3f2a9c...-2
    """
    with cli_errors(), open_client(url, token, store) as client:
        found = client.get_operation(operation_id)
    if as_json:
        emit_json(found.as_dict())
    else:
        _show(found)


@app.command()
def reviews(
    limit: Annotated[int, typer.Option(min=1, max=1000, help="At most this many.")] = 100,
    url: UrlOption = None,
    token: TokenOption = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """List the operations waiting for review (uncertain outcomes of open runs).

    Example:

        keepgoing reviews
    """
    with cli_errors(), open_client(url, token, store) as client:
        found = client.list_reviews(limit=limit)
    if as_json:
        emit_json([o.as_dict() for o in found])
        return
    if not found:
        console.print("no operation is waiting for review")
        return
    table = Table("operation", "workflow", "task", "evidence")
    for o in found:
        message = (o.error or {}).get("message", "")
        add_row(table, o.operation_id, o.workflow_id, o.task, str(message))
    console.print(table)


@app.command()
def review(
    operation_id: Annotated[str, typer.Argument(help="The uncertain operation.")],
    decision: Annotated[str, typer.Argument(help="approve, retry or fail.")],
    result: Annotated[
        str | None, typer.Option(help="With approve: the step's result, JSON or @file.")
    ] = None,
    reason: Annotated[str | None, typer.Option(help="Why (kept in the audit log).")] = None,
    url: UrlOption = None,
    token: TokenOption = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Decide an uncertain operation: approve (with --result), retry or fail.

    The decision is sent to the run as a message with your identity (your
    token's, or your login on the store) and audited.

    Example:

        keepgoing review op-3f2a9c...-2 approve --result '{"record": "C-88"}'
    """
    if decision not in DECISIONS:
        fail(f"decision must be one of {', '.join(DECISIONS)}, not {decision!r}")
    value = parse_json(result, "the result")
    with cli_errors(), open_client(url, token, store) as client:
        found = client.review_operation(operation_id, decision, result=value, reason=reason)
    if as_json:
        emit_json({"operation_id": found.operation_id, "decision": decision, "cmd": found.cmd})
    else:
        console.print(f"sent {decision} for {found.operation_id} (step {found.cmd})", markup=False)
