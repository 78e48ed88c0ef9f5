"""The history codec: every event kind survives a round trip through JSON."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest

from keepgoing._history import events as ev
from keepgoing._history.codec import (
    _CLASSES,
    decode,
    decode_many,
    dumps_history,
    encode,
    loads_history,
)

ERROR = ev.ErrorInfo(type="ValueError", message="bad", traceback="Traceback ...\nValueError: bad")

ONE_OF_EACH: list[ev.Event] = [
    ev.WorkflowStarted(
        seq=1,
        at=1.5,
        workflow_name="wf",
        workflow_id="wf-1",
        run_id="r",
        input={"args": [1, "two"], "kwargs": {"x": None}},
        code_version="abc",
        task_queue="q",
    ),
    ev.ActivationCompleted(seq=2, at=2.0, saw_upto=1, time=1.5, worker="w"),
    ev.TaskScheduled(
        seq=3,
        at=2.0,
        cmd=1,
        name="t",
        args=[{"a": [1.25]}],
        kwargs={"k": True},
        retries=2,
        retry_delay=30.0,
        timeout=300.0,
        max_worker_losses=1,
        image="img",
    ),
    ev.TaskAttemptFailed(
        seq=4,
        at=3.0,
        cmd=1,
        name="t",
        attempt=1,
        error=ERROR,
        reason="error",
        worker="w",
        started_at=2.5,
        retry_at=33.0,
    ),
    ev.TaskCompleted(seq=5, at=4.0, cmd=1, result={"ok": [1, 2]}, attempt=2, worker="w"),
    ev.TaskFailed(seq=6, at=4.0, cmd=2, name="u", error=ERROR, attempts=3, reason="timeout"),
    ev.TimerStarted(seq=7, at=5.0, cmd=3, fire_at=65.0),
    ev.TimerCancelled(seq=8, at=5.0, cmd=3),
    ev.TimerFired(seq=9, at=66.0, cmd=4),
    ev.WorkflowCompleted(seq=10, at=70.0, result=None),
    ev.WorkflowFailed(seq=11, at=70.0, error=ev.ErrorInfo(type="KeyError", message="'k'")),
    ev.WorkflowBlocked(seq=12, at=71.0, reason="diff"),
]


def test_the_codec_knows_every_event_class() -> None:
    classes = {
        name
        for name in ev.__all__
        if isinstance(getattr(ev, name), type)
        and issubclass(getattr(ev, name), ev.Event)
        and name != "Event"
    }
    assert classes == set(_CLASSES)
    assert all(_CLASSES[name] is getattr(ev, name) for name in classes)


@pytest.mark.parametrize("event", ONE_OF_EACH, ids=lambda e: type(e).__name__)
def test_round_trip(event: ev.Event) -> None:
    body = encode(event)
    assert body["type"] == type(event).__name__
    assert decode(body) == event
    assert loads_history(dumps_history([event])) == [event]


def test_errors_are_plain_objects_in_json() -> None:
    body = encode(ONE_OF_EACH[3])
    assert body["error"] == {"type": "ValueError", "message": "bad", "traceback": ERROR.traceback}


def test_a_history_document_has_one_event_per_line() -> None:
    text = dumps_history(ONE_OF_EACH)
    lines = text.splitlines()
    assert lines[0] == '{"events": ['
    assert lines[-1] == "]}"
    assert len(lines) == len(ONE_OF_EACH) + 2
    assert loads_history(text) == ONE_OF_EACH
    assert loads_history(text.encode()) == ONE_OF_EACH


def test_a_bare_list_is_accepted() -> None:
    bodies = [encode(e) for e in ONE_OF_EACH]
    assert decode_many(bodies) == ONE_OF_EACH
    assert loads_history(json.dumps(bodies)) == ONE_OF_EACH


def test_unknown_types_and_fields_are_errors() -> None:
    with pytest.raises(ValueError, match="unknown history event type 'Nope'"):
        decode({"type": "Nope", "seq": 1})
    with pytest.raises(ValueError, match="unknown history event type None"):
        decode({"seq": 1})
    with pytest.raises(TypeError):
        decode({"type": "TimerFired", "seq": 1, "cmd": 1, "colour": "red"})


def test_decode_does_not_change_its_input() -> None:
    body = encode(ONE_OF_EACH[5])
    before = dict(body)
    decode(body)
    assert body == before


def test_non_finite_numbers_cannot_be_written() -> None:
    with pytest.raises(ValueError, match="JSON"):
        dumps_history([ev.TimerStarted(seq=1, cmd=1, fire_at=math.inf)])


def test_key_is_kind_cmd_and_name() -> None:
    assert ONE_OF_EACH[2].key() == ("TaskScheduled", 1, "t")
    assert ONE_OF_EACH[6].key() == ("TimerStarted", 3, "")
    assert ONE_OF_EACH[7].key() == ("TimerCancelled", 3, "")
    assert ONE_OF_EACH[9].key() == ("WorkflowCompleted", 0, "")
    roles = {type(e).__name__: e.ROLE for e in ONE_OF_EACH}
    assert roles == {  # DESIGN section 10: inputs, commands, markers; info is never delivered
        "WorkflowStarted": "input",
        "ActivationCompleted": "marker",
        "TaskScheduled": "command",
        "TaskAttemptFailed": "info",
        "TaskCompleted": "input",
        "TaskFailed": "input",
        "TimerStarted": "command",
        "TimerCancelled": "command",
        "TimerFired": "input",
        "WorkflowCompleted": "command",
        "WorkflowFailed": "command",
        "WorkflowBlocked": "info",
    }


def test_a_lost_attempts_cause_is_left_out_while_unset() -> None:
    lost = ev.TaskAttemptFailed(
        cmd=1, name="t", attempt=1, error=ev.ErrorInfo(type="x", message="y"), reason="worker_lost"
    )
    assert {"cause", "actor", "via"}.isdisjoint(encode(lost))  # as histories before them
    stamped = dataclasses.replace(lost, cause="killed_by_request", actor="alice", via="ui")
    body = encode(stamped)
    assert (body["cause"], body["actor"], body["via"]) == ("killed_by_request", "alice", "ui")
    assert decode(body) == stamped
    assert decode(encode(lost)).cause is None  # an old history decodes with no cause
