"""The timeline that ``keepgoing show`` draws: how a step's end is named."""

from __future__ import annotations

from keepgoing._history import events as ev
from keepgoing.cli._timeline import build


def _history(reason: str) -> list[ev.Event]:
    return [
        ev.WorkflowStarted(
            seq=1,
            at=1.0,
            workflow_name="crm",
            workflow_id="w",
            run_id="r",
            input={},
            code_version="v",
        ),
        ev.TaskScheduled(seq=2, at=1.1, cmd=1, name="update_customer"),
        ev.TaskFailed(
            seq=3,
            at=1.2,
            cmd=1,
            name="update_customer",
            attempts=1,
            reason=reason,
            error=ev.ErrorInfo(type="keepgoing.UncertainOutcome", message="no answer"),
        ),
    ]


def test_an_uncertain_step_is_shown_as_uncertain_not_failed() -> None:
    assert build(_history("uncertain")).steps[1].status == "uncertain"


def test_a_step_that_failed_is_shown_as_failed() -> None:
    assert build(_history("error")).steps[1].status == "failed"
