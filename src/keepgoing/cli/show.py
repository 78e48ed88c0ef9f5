"""``keepgoing show``: a run's timeline in the terminal."""

from __future__ import annotations

from typing import Annotated

import typer

from keepgoing.cli import _timeline
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
)


@app.command()
def show(
    workflow_id: Annotated[str, typer.Argument(help="The workflow id of the run.")],
    run_id: Annotated[str | None, typer.Option(help="A specific run of the workflow id.")] = None,
    url: UrlOption = None,
    token: TokenOption = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show a run as a timeline: each step with its attempts, worker, duration,
    retries and errors; timers; messages and events.

    Example:

        keepgoing show score-b-1
    """
    with cli_errors(), open_client(url, token, store) as client:
        run = client.get_run(workflow_id, run_id=run_id)
        history = client.history(workflow_id, run_id=run.run_id)
    timeline = _timeline.build(history)
    if as_json:
        emit_json({"run": run, "timeline": timeline})
        return
    console.print(_timeline.render(timeline))
