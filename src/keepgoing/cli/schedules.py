"""``keepgoing schedules ls | show | create | pause | unpause | trigger | backfill | rm``.

With ``--url`` (or ``KEEPGOING_URL``) the commands call the server (tokens with
``schedules.read`` / ``schedules.write``); otherwise they use the store.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from keepgoing._schedule_spec import slot_iso
from keepgoing._schedules.commands import ScheduleInfo
from keepgoing._store.schedules_protocol import ScheduleAction
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

schedules_app = typer.Typer(
    help="Schedules: cron or interval starts of a workflow.", no_args_is_help=True
)
app.add_typer(schedules_app, name="schedules")

Id = Annotated[str, typer.Argument(help="The schedule's id.")]
Note = Annotated[str | None, typer.Option("--note", help="Why (kept with the schedule).")]


def _moment(text: str, what: str) -> float:
    """An ISO 8601 time (UTC when it names no offset)."""
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        fail(f"{what} {text!r} is not an ISO 8601 time such as 2026-01-05T08:00:00Z", 2)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def _action_row(table: Table, a: ScheduleAction) -> None:
    add_row(table, slot_iso(a.slot_at), a.kind, a.status, a.workflow_id, a.reason or "")


def _show(info: ScheduleInfo) -> None:
    state = f"paused ({escape(info.note)})" if info.paused and info.note else "paused"
    head = f"{info.schedule_id} starts {info.workflow} on {info.task_queue}"
    console.print(escape(head), style="bold")
    console.print(
        f"  {info.description}, overlap {info.overlap}, catch-up {info.catchup_window:g}s"
    )
    console.print(f"  {state if info.paused else 'active'} (declared in {info.source})")
    for moment in info.next_fire_times:
        console.print(f"  next: {slot_iso(moment)}")
    table = Table("slot", "kind", "status", "workflow id", "reason")
    for action in info.recent_actions:
        _action_row(table, action)
    console.print(table)


@schedules_app.command("ls")
def list_command(
    url: UrlOption = None,
    token: TokenOption = None,
    store: StoreOption = None,
    json: JsonOption = False,
) -> None:
    """List schedules, with their next fire time.

    Example:

        keepgoing schedules ls
    """
    with cli_errors(), open_client(url, token, store) as client:
        found = client.list_schedules()
        if json:
            emit_json([s.to_body() for s in found])
            return
        table = Table("id", "workflow", "spec", "state", "next fire")
        for s in found:
            upcoming = slot_iso(s.next_fire_times[0]) if s.next_fire_times else "-"
            add_row(
                table,
                s.schedule_id,
                s.workflow,
                s.description,
                "paused" if s.paused else "active",
                upcoming,
            )
        console.print(table)


@schedules_app.command("show")
def show_command(
    schedule_id: Id,
    url: UrlOption = None,
    token: TokenOption = None,
    store: StoreOption = None,
    json: JsonOption = False,
) -> None:
    """Its spec and state, next five fire times and last ten actions.

    Example:

        keepgoing schedules show weekly-digest
    """
    with cli_errors(), open_client(url, token, store) as client:
        info = client.get_schedule(schedule_id)
        emit_json(info.to_body()) if json else _show(info)


@schedules_app.command("create")
def create_command(
    schedule_id: Id,
    workflow: Annotated[str, typer.Argument(help="The workflow's name.")],
    input: Annotated[
        str | None, typer.Option("--input", help="JSON input (or @file.json).")
    ] = None,
    cron: Annotated[str | None, typer.Option("--cron", help="5 fields, or @daily ...")] = None,
    every: Annotated[str | None, typer.Option("--every", help='A duration: "15m".')] = None,
    offset: Annotated[str | None, typer.Option("--offset", help="With --every.")] = None,
    timezone: Annotated[str, typer.Option("--timezone", help="An IANA zone.")] = "UTC",
    overlap: Annotated[str, typer.Option("--overlap", help="skip, buffer_one, ...")] = "skip",
    catchup_window: Annotated[str, typer.Option("--catchup-window")] = "1h",
    jitter: Annotated[str | None, typer.Option("--jitter")] = None,
    task_queue: Annotated[str | None, typer.Option("--queue", "-q")] = None,
    paused: Annotated[bool, typer.Option("--paused", help="Create it paused.")] = False,
    note: Note = None,
    url: UrlOption = None,
    token: TokenOption = None,
    store: StoreOption = None,
    json: JsonOption = False,
) -> None:
    """Create a schedule.

    Example:

        keepgoing schedules create digest support_digest --cron "0 7 * * 1" --timezone Europe/Paris
    """
    with cli_errors(), open_client(url, token, store) as client:
        info = client.create_schedule(
            schedule_id,
            workflow,
            parse_json(input, "--input"),
            cron=cron,
            every=every,
            offset=offset,
            timezone=timezone,
            overlap=overlap,
            catchup_window=catchup_window,
            jitter=jitter,
            task_queue=task_queue,
            paused=paused,
            note=note,
        )
        emit_json(info.to_body()) if json else _show(info)


@schedules_app.command("pause")
def pause_command(
    schedule_id: Id,
    note: Note = None,
    url: UrlOption = None,
    token: TokenOption = None,
    store: StoreOption = None,
) -> None:
    """Stop starting slots.

    Example:

        keepgoing schedules pause weekly-digest --note "CRM maintenance"
    """
    with cli_errors(), open_client(url, token, store) as client:
        client.pause_schedule(schedule_id, note=note)
        console.print(f"paused {schedule_id}")


@schedules_app.command("unpause")
def unpause_command(
    schedule_id: Id,
    note: Note = None,
    url: UrlOption = None,
    token: TokenOption = None,
    store: StoreOption = None,
) -> None:
    """Start slots again, from the next one (missed ones are not made up).

    Example:

        keepgoing schedules unpause weekly-digest
    """
    with cli_errors(), open_client(url, token, store) as client:
        info = client.unpause_schedule(schedule_id, note=note)
        upcoming = slot_iso(info.next_fire_times[0]) if info.next_fire_times else "none"
        console.print(f"unpaused {schedule_id}; next fire {upcoming}")


@schedules_app.command("trigger")
def trigger_command(
    schedule_id: Id,
    url: UrlOption = None,
    token: TokenOption = None,
    store: StoreOption = None,
    json: JsonOption = False,
) -> None:
    """Act on a slot now (under the overlap policy).

    Example:

        keepgoing schedules trigger weekly-digest
    """
    with cli_errors(), open_client(url, token, store) as client:
        action = client.trigger_schedule(schedule_id)
        if json:
            emit_json(action)
            return
        console.print(f"{action.status} {action.workflow_id} {action.reason or ''}".rstrip())


@schedules_app.command("backfill")
def backfill_command(
    schedule_id: Id,
    start: Annotated[str, typer.Argument(help="ISO 8601, e.g. 2026-01-05T00:00:00Z.")],
    end: Annotated[str, typer.Argument(help="ISO 8601 (inclusive).")],
    overlap: Annotated[str | None, typer.Option("--overlap", help="Default allow_all.")] = None,
    url: UrlOption = None,
    token: TokenOption = None,
    store: StoreOption = None,
    json: JsonOption = False,
) -> None:
    """Act on every slot in [START, END] with no action yet: one run per slot.

    Example:

        keepgoing schedules backfill weekly-digest 2026-11-02T00:00:00Z 2026-11-30T00:00:00Z
    """
    with cli_errors(), open_client(url, token, store) as client:
        actions = client.backfill_schedule(
            schedule_id, _moment(start, "start"), _moment(end, "end"), overlap=overlap
        )
        if json:
            emit_json(actions)
            return
        table = Table("slot", "kind", "status", "workflow id", "reason")
        for action in actions:
            _action_row(table, action)
        console.print(table)


@schedules_app.command("rm")
def rm_command(
    schedule_id: Id, url: UrlOption = None, token: TokenOption = None, store: StoreOption = None
) -> None:
    """Delete a schedule (its runs stay).

    Example:

        keepgoing schedules rm weekly-digest
    """
    with cli_errors(), open_client(url, token, store) as client:
        client.delete_schedule(schedule_id)
        console.print(f"deleted {schedule_id}")
