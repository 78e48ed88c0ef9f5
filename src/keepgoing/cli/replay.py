"""``keepgoing replay FILE.py HISTORY.json``: does today's code replay a recorded run?"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from keepgoing._api.registry import registry
from keepgoing._history import events as ev
from keepgoing._history.codec import loads_history
from keepgoing._worker.loader import load_file
from keepgoing.cli._app import app
from keepgoing.cli._common import JsonOption, cli_errors, console, emit_json, fail
from keepgoing.errors import NondeterminismError
from keepgoing.testing import replay as replay_history


@app.command()
def replay(
    file: Annotated[str, typer.Argument(help="The Python file that defines the workflow.")],
    history: Annotated[Path, typer.Argument(help="A history from `keepgoing history export`.")],
    workflow: Annotated[
        str | None, typer.Option(help="The workflow's name (default: the one in the history).")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Check that FILE's current code replays HISTORY without a determinism error.

    Exits 0 when it does, 1 with the diff when it does not: a CI gate for
    changes to workflow code.

    Example:

        keepgoing replay pipeline.py tests/golden/score_b_1.json
    """
    try:
        text = history.read_text(encoding="utf-8")
    except OSError as exc:
        fail(f"cannot read {history}: {exc.strerror}", 2)
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
