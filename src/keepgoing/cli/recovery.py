"""``keepgoing runs resume | fork | status``: go on with a failed run, fork a run from a
step, and read the progress a run publishes."""

from __future__ import annotations

from typing import Annotated

import typer

from keepgoing._payload import dumps
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
from keepgoing.cli.runs import runs_app

__all__ = ["fork", "resume", "status"]

RevisionOption = Annotated[
    int | None, typer.Option(min=1, help="Pin the new run to this group revision.")
]


@runs_app.command("resume")
def resume(
    workflow_id: Annotated[str, typer.Argument(help="The workflow id of the failed run.")],
    revision: RevisionOption = None,
    url: UrlOption = None,
    token: TokenOption = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Go on with a failed or cancelled run as a new run of the same id: every step
    that finished is reused, the failed step runs again on the current code.

    Example:

        keepgoing runs resume nightly-2026-01-01
    """
    with cli_errors(), open_client(url, token, store) as client:
        handle = client.resume_workflow(workflow_id, revision=revision)
    if as_json:
        emit_json(handle)
        return
    console.print(f"resumed {handle.workflow_id} as run {handle.run_id}")


@runs_app.command("fork")
def fork(
    workflow_id: Annotated[str, typer.Argument(help="The workflow id of the ended run.")],
    from_step: Annotated[
        int, typer.Option("--from-step", min=1, help="The step (# in keepgoing show) to rerun.")
    ],
    input: Annotated[
        str | None,
        typer.Option("--input", "-i", help="The fork's JSON input, or @file (default: the same)."),
    ] = None,
    new_id: Annotated[
        str | None, typer.Option("--workflow-id", help="The fork's workflow id.")
    ] = None,
    revision: RevisionOption = None,
    wait_for_check: Annotated[
        bool,
        typer.Option(
            "--wait-for-check",
            help="Return once the fork has passed the check of the steps it reuses "
            "(exit 1 with the reason if it was refused).",
        ),
    ] = False,
    url: UrlOption = None,
    token: TokenOption = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Start a new run that reuses the results of the steps before --from-step and runs
    the rest, with --input if given. A reused step the new input or code would
    schedule with other arguments fails the fork at its first activation.

    Example:

        keepgoing runs fork digest-7 --from-step 3 --input '{"topic": "billing"}'
    """
    value = parse_json(input, "--input") if input is not None else None
    with cli_errors(), open_client(url, token, store) as client:
        handle = client.fork_workflow(
            workflow_id,
            from_step,
            input=value,
            workflow_id=new_id,
            revision=revision,
            wait_for_check=wait_for_check,
        )
    if as_json:
        emit_json(handle)
        return
    console.print(f"forked {workflow_id} from step {from_step} as {handle.workflow_id}")


@runs_app.command("status")
def status(
    workflow_id: Annotated[str, typer.Argument(help="The run's workflow id.")],
    key: Annotated[str, typer.Argument(help="The key the run publishes with set_status.")],
    wait: Annotated[
        float | None, typer.Option(min=0, help="Wait this many seconds for it to appear.")
    ] = None,
    url: UrlOption = None,
    token: TokenOption = None,
    store: StoreOption = None,
) -> None:
    """Print the newest value the run published under KEY, as JSON (null: none).

    Example:

        keepgoing runs status digest-7 progress --wait 30
    """
    with cli_errors(), open_client(url, token, store) as client:
        value = client.get_status(workflow_id, key, wait=wait)
    console.print(dumps(value), highlight=False, soft_wrap=True)
