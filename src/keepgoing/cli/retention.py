"""``keepgoing runs prune``, ``runs show`` and ``history show``: retention from the terminal.

``runs prune`` runs the services' sweep once, on the store, with its own age;
``runs show`` finds a run in the store or, once its rows are gone, in the
archive; ``history show`` prints the timeline of an export or an archive file.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

import typer

from keepgoing._durations import parse_duration
from keepgoing._history.codec import loads_history
from keepgoing._open_store import store_from_url
from keepgoing._store.retention_protocol import RetentionWindow
from keepgoing._worker.archive import locate, read_archive, read_history_text
from keepgoing._worker.retention import RetentionPolicy, RetentionSweep, load_retention
from keepgoing.cli import _timeline
from keepgoing.cli._common import (
    JsonOption,
    StoreOption,
    announce_store,
    cli_errors,
    console,
    emit_json,
    fail,
)
from keepgoing.cli.history import history_app
from keepgoing.cli.runs import runs_app
from keepgoing.errors import ConfigurationError, InvalidDurationError

ArchiveOption = Annotated[
    str | None,
    typer.Option(
        help="The archive folder or fsspec URL (default: [retention] archive in keepgoing.toml)."
    ),
]


@runs_app.command("prune")
def prune(
    older_than: Annotated[
        str, typer.Option("--older-than", help="Delete runs that ended longer ago (7d, 12h).")
    ],
    workflow: Annotated[str | None, typer.Option(help="Only runs of this workflow.")] = None,
    archive: ArchiveOption = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="List what would go; delete nothing.")
    ] = False,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Archive (with --archive or [retention] archive) and delete the ended runs older
    than --older-than, by the rules of the retention sweep: an open run, a child of
    an open parent and an operation waiting for review are never deleted.

    Example:

        keepgoing runs prune --older-than 7d --archive ./archive --dry-run
    """
    try:
        age = parse_duration(older_than, what="--older-than")
    except InvalidDurationError as exc:
        fail(str(exc), 2)
    if age <= 0:
        fail("--older-than must be longer than zero", 2)
    with cli_errors():
        policy = load_retention()
        folder = str(archive) if archive is not None else policy.archive
        report = asyncio.run(_prune(store, policy, age, workflow, folder, dry_run))
    if as_json:
        emit_json(report)
        return
    if dry_run:
        for run in report["would_delete"]:
            console.print(f"{run['workflow_id']}  {run['run_id']}  {run['status']}", markup=False)
        console.print(f"would delete {len(report['would_delete'])} run(s)", markup=False)
        return
    where = f" to {folder}" if folder else " (no archive)"
    console.print(
        f"deleted {report['runs']} run(s), {report['rows']} rows; "
        f"archived {len(report['archived'])}{where}",
        markup=False,
    )


async def _prune(
    url: str | None,
    policy: RetentionPolicy,
    age: float,
    workflow: str | None,
    folder: str | None,
    dry_run: bool,
) -> dict[str, Any]:
    backend = store_from_url(announce_store(url))
    await backend.open()
    try:
        sweep = RetentionSweep(backend, policy, owner="keepgoing runs prune", batches=1_000_000)
        now = sweep.clock.now()
        window = RetentionWindow(now=now, older_than=age, workflow=workflow)
        report = await sweep.sweep(window, dry_run=dry_run, archive=folder)
    finally:
        await backend.close()
    return {
        "runs": report.swept.runs,
        "rows": report.swept.total,
        "by_table": report.swept.rows,
        "archived": report.archived,
        "would_delete": [
            {"run_id": r.run_id, "workflow_id": r.workflow_id, "status": r.status}
            for r in report.would_delete
        ],
    }


@runs_app.command("show")
def show_run(
    ident: Annotated[str, typer.Argument(help="A run id or a workflow id.")],
    archive: ArchiveOption = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """A run's row, from the store or, once retention deleted it, from the archive.

    Example:

        keepgoing runs show 0b7e6f3c9d2a4e1f8a5b6c7d8e9f0a1b
    """
    with cli_errors():
        found = asyncio.run(_find(store, ident))
        if found is None:
            folder = str(archive) if archive is not None else load_retention().archive
            paths = locate(folder, ident) if folder else []
            if not paths:
                where = f" nor in the archive {folder}" if folder else " (no archive is set)"
                fail(f"no run {ident!r} in the store{where}")
            body = read_archive(paths[-1])
            found = {**body.get("run", {}), "archived": paths[-1]}
    if as_json:
        emit_json(found)
        return
    for key in ("workflow_id", "run_id", "workflow_name", "status", "result", "error"):
        console.print(f"{key}: {found.get(key)}", markup=False)
    if "archived" in found:
        console.print(f"archived: {found['archived']}", markup=False)


async def _find(url: str | None, ident: str) -> dict[str, Any] | None:
    backend = store_from_url(announce_store(url))
    await backend.open()
    try:
        run = await backend.get_run(ident) or await backend.find_run(ident)
    finally:
        await backend.close()
    if run is None:
        return None
    error = None if run.error is None else f"{run.error.type}: {run.error.message}"
    return {
        "workflow_id": run.workflow_id,
        "run_id": run.run_id,
        "workflow_name": run.workflow_name,
        "status": run.status,
        "result": run.result,
        "error": error,
    }


@history_app.command("show")
def show_file(
    file: Annotated[
        str, typer.Argument(help="An export or an archive (.json.gz): a file, or an fsspec URL.")
    ],
    as_json: JsonOption = False,
) -> None:
    """Print the timeline of a history file: `keepgoing history export`'s output, or a
    run archived by retention.

    Example:

        keepgoing history show archive/2026-01-31/nightly.3f2a.json.gz
    """
    try:
        text = read_history_text(file)
    except (OSError, ValueError, ConfigurationError) as exc:
        fail(f"cannot read {file}: {exc}", 2)
    with cli_errors():
        events = loads_history(text)
    timeline = _timeline.build(events)
    if as_json:
        emit_json({"timeline": timeline})
        return
    console.print(_timeline.render(timeline))
