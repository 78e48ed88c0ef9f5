"""The shipped support-digest recording follows the build: it decodes and encodes back
unchanged with this build's codec, was recorded from the agent as it is now, its
worker loss carries the cause this build records, and its lookups waited for the
directory's rate limit. ``make record-demo`` re-records it."""

from __future__ import annotations

from keepgoing._demo.record import OUTPUT, agent_version, recorded
from keepgoing._demo.usecases.holdback import lookups_of
from keepgoing._history import events as ev
from keepgoing._history.codec import dumps_history

RERECORD = "the shipped recording is older than this build: run `make record-demo`"


def test_the_recording_encodes_back_as_it_is_stored() -> None:
    assert dumps_history(recorded()) == OUTPUT.read_text(encoding="utf-8"), RERECORD


def test_the_recording_was_made_from_the_agent_as_it_is() -> None:
    versions = {
        e.code_version
        for e in recorded()
        if isinstance(e, ev.WorkflowStarted | ev.ActivationCompleted) and e.code_version
    }
    assert versions == {agent_version()}, RERECORD


def test_its_worker_loss_says_who_killed_the_worker_and_from_where() -> None:
    lost = [
        e for e in recorded() if isinstance(e, ev.TaskAttemptFailed) and e.reason == "worker_lost"
    ]
    assert lost, RERECORD
    assert {(e.cause, e.via) for e in lost} == {("killed_by_request", "api")}, RERECORD
    assert all(e.actor for e in lost), RERECORD


def test_its_lookups_were_held_back_by_the_directory_limit_not_refused() -> None:
    lookups = lookups_of(recorded())
    assert lookups.lookups == 16 and lookups.held > 0, RERECORD
    assert lookups.refused <= 1 and not lookups.failed, RERECORD
    errors = [e for e in recorded() if isinstance(e, ev.TaskAttemptFailed) and e.reason == "error"]
    assert {e.name for e in errors} <= {"lookup_customer"}, RERECORD
