"""``keepgoing replay``: does today's code replay recorded runs?

``keepgoing replay FILE.py HISTORY.json`` checks one exported history.
``keepgoing replay FILE.py --against-store`` checks the runs in flight, read from
the store (or from ``--export``, a file of ``keepgoing history export --running``):
what a deploy of FILE with ``--upgrade auto`` would check, as a CI gate.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from keepgoing._groups.replaycheck import (
    DEFAULT_PER_NAME,
    DEFAULT_TIME_LIMIT,
    ReplayReport,
    check_bounds,
    replay_histories,
    sample,
)
from keepgoing._history import events as ev
from keepgoing._history.codec import loads_history
from keepgoing._store.group_records import OpenRun
from keepgoing._worker.archive import read_history_text
from keepgoing._worker.loader import load_file
from keepgoing._workflow.registry import registry
from keepgoing.cli._app import app
from keepgoing.cli._common import (
    JsonOption,
    StoreOption,
    TokenOption,
    UrlOption,
    cli_errors,
    console,
    emit_json,
    fail,
    open_client,
)
from keepgoing.cli.history import running_histories
from keepgoing.errors import ConfigurationError, NondeterminismError
from keepgoing.testing import replay as replay_history


@app.command()
def replay(
    file: Annotated[str, typer.Argument(help="The Python file that defines the workflow.")],
    history: Annotated[
        str | None,
        typer.Argument(
            help="A history from `keepgoing history export`, or a run's archive "
            "(a file, or an fsspec URL such as s3://bucket/kg/2026-01-31/nightly.3f2a.json.gz)."
        ),
    ] = None,
    workflow: Annotated[
        str | None, typer.Option(help="The workflow's name (default: the one in the history).")
    ] = None,
    against_store: Annotated[
        bool,
        typer.Option(
            "--against-store", help="Check the runs in flight (from the store, or --export)."
        ),
    ] = False,
    export: Annotated[
        Path | None,
        typer.Option(help="With --against-store: a file of `keepgoing history export --running`."),
    ] = None,
    group: Annotated[
        str | None, typer.Option(help="With --against-store: only the runs of this group.")
    ] = None,
    limit: Annotated[
        int, typer.Option(help="With --against-store: runs per workflow, newest first.")
    ] = DEFAULT_PER_NAME,
    time_limit: Annotated[
        float, typer.Option(help="With --against-store: seconds for the whole check.")
    ] = DEFAULT_TIME_LIMIT,
    url: UrlOption = None,
    token: TokenOption = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Check that FILE's current code replays HISTORY (or, with --against-store, the
    runs in flight) without a determinism error.

    Exits 0 when it does, 1 with the diff of each run that does not: a CI gate for
    changes to workflow code. The check of runs in flight is bounded (--limit runs
    per workflow, newest first, within --time-limit seconds) and says so.

    Example:

        keepgoing replay pipeline.py tests/golden/score_b_1.json

        keepgoing history export --running -o running.json   # against production
        keepgoing replay pipeline.py --against-store --export running.json
    """
    if against_store:
        if history is not None:
            fail("give either HISTORY or --against-store, not both", 2)
        _against_store(file, export, group, limit, time_limit, url, token, store, as_json)
        return
    if history is None:
        fail("give a HISTORY file, or --against-store", 2)
    _one_history(file, history, workflow, as_json)


def _one_history(file: str, history: str, workflow: str | None, as_json: bool) -> None:
    try:
        text = read_history_text(history)  # an export, or a run's archive (gzip)
    except (OSError, ValueError, ConfigurationError) as exc:
        fail(f"cannot read {history}: {getattr(exc, 'strerror', None) or exc}", 2)
    with cli_errors():
        events = loads_history(text)
        started = next((e for e in events if isinstance(e, ev.WorkflowStarted)), None)
        if started is None:
            fail(f"{history} has no WorkflowStarted event", 2)
        load_file(file)
        name = workflow or started.workflow_name
        definition = registry.workflows.get(name)
        if definition is None:
            known = ", ".join(sorted(registry.workflows)) or "none"
            fail(f"{file} defines no workflow named {name!r} (it defines: {known})", 2)
    try:
        replay_history(events, definition)
    except NondeterminismError as exc:
        if as_json:
            emit_json({"ok": False, "workflow": name, "events": len(events), "error": str(exc)})
        else:
            console.print(f"[red]{escape(file)} does not replay {escape(str(history))}[/]:")
            console.print(str(exc), markup=False)
        raise typer.Exit(1) from None
    if as_json:
        emit_json({"ok": True, "workflow": name, "events": len(events), "error": None})
    else:
        detail = f"{file} replays {history} ({len(events)} events of {name})"
        console.print(f"[green]ok[/]: {escape(detail)}")


def _against_store(
    file: str,
    export: Path | None,
    group: str | None,
    limit: int,
    time_limit: float,
    url: str | None,
    token: str | None,
    store: str | None,
    as_json: bool,
) -> None:
    with cli_errors():
        per_name, seconds = check_bounds(limit, time_limit)
        try:
            source = Path(file).read_text(encoding="utf-8")
        except OSError as exc:
            fail(f"cannot read {file}: {exc.strerror}", 2)
        load_file(file)  # only to know its workflow names; the check runs apart
        names = set(registry.workflows)
        if export is not None:
            runs = _read_export(export)
        else:
            with open_client(url, token, store) as client:
                runs = running_histories(client, group=group, names=names)
        if group is not None and export is not None:
            runs = [r for r in runs if r.get("task_queue") in (None, f"workflows.{group}")]
        runs = [r for r in runs if r["workflow_name"] in names]
        cases = {r["run_id"]: r for r in runs}
        chosen, left = sample([_open_run(r) for r in runs], per_name)
        report = asyncio.run(
            replay_histories(
                [(run, cases[run.run_id]["events"]) for run in chosen],
                source=source,
                filename=Path(file).name,
                per_name=per_name,
                time_limit=seconds,
                not_sampled=left,
                import_path=(str(Path(file).resolve().parent),),
            )
        )
    _show(file, report, as_json)


def _show(file: str, report: ReplayReport, as_json: bool) -> None:
    if as_json:
        emit_json({"ok": not report.failures, **report.to_body()})
    elif report.failures:
        console.print(f"[red]{escape(file)} would block {len(report.failures)} run(s)[/]:")
        console.print(report.summary(), markup=False)
    else:
        console.print(f"[green]ok[/]: {escape(file)}: {escape(report.bound())}")
    if report.failures:
        raise typer.Exit(1)


def _read_export(path: Path) -> list[dict[str, Any]]:
    try:
        body = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        fail(f"cannot read {path}: {exc}", 2)
    runs = body.get("runs") if isinstance(body, dict) else None
    if not isinstance(runs, list) or not all(
        isinstance(r, dict) and {"run_id", "workflow_name", "events"} <= set(r) for r in runs
    ):
        fail(f"{path} is not an export of `keepgoing history export --running`", 2)
    return runs


def _open_run(body: dict[str, Any]) -> OpenRun:
    return OpenRun(
        run_id=str(body["run_id"]),
        workflow_id=str(body.get("workflow_id", "")),
        workflow_name=str(body["workflow_name"]),
        group_revision=body.get("group_revision"),
        status=str(body.get("status", "running")),
        next_seq=len(body["events"]) + 1,
        created_at=float(body.get("created_at") or 0.0),
    )
