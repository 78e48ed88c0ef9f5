"""``keepgoing history export``: a run's history as JSON (for replay tests and CI)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from keepgoing._history.codec import dumps_history
from keepgoing.cli._app import app
from keepgoing.cli._common import (
    StoreOption,
    TokenOption,
    UrlOption,
    cli_errors,
    console,
    fail,
    open_client,
)

history_app = typer.Typer(help="Export run histories.", no_args_is_help=True)
app.add_typer(history_app, name="history")


@history_app.command("export")
def export(
    workflow_id: Annotated[str, typer.Argument(help="The workflow id of the run.")],
    run_id: Annotated[str | None, typer.Option(help="A specific run of the workflow id.")] = None,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write here instead of stdout.")
    ] = None,
    url: UrlOption = None,
    token: TokenOption = None,
    store: StoreOption = None,
) -> None:
    """Export a run's history as JSON ({"events": [...]}), the format of golden
    files and of `keepgoing replay`.

    Example:

        keepgoing history export score-b-1 -o tests/golden/score_b_1.json
    """
    with cli_errors(), open_client(url, token, store) as client:
        events = client.history(workflow_id, run_id=run_id)
    text = dumps_history(events)
    if output is None:
        typer.echo(text, nl=False)
        return
    try:
        output.write_text(text, encoding="utf-8")
    except OSError as exc:
        fail(f"cannot write {output}: {exc.strerror}")
    console.print(f"wrote {len(events)} events of {workflow_id} to {output}", markup=False)
