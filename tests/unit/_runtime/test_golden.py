"""Recorded histories in tests/golden/ must keep replaying against their workflows."""

from __future__ import annotations

import asyncio
import dataclasses
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from keepgoing import NondeterminismError, workflow
from keepgoing._history import events as ev
from keepgoing._history.codec import decode, dumps_history, encode, loads_history
from keepgoing._runtime.instance import WorkflowInstance
from keepgoing.testing import replay

GOLDEN_DIR = Path(__file__).resolve().parents[2] / "golden"
GOLDEN_FILES = sorted(GOLDEN_DIR.glob("*.json"))


def _load_workflows() -> ModuleType:
    name = "keepgoing_golden_workflows"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, GOLDEN_DIR / "workflows.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


golden = _load_workflows()


def _history(path: Path) -> list[ev.Event]:
    return loads_history(path.read_text(encoding="utf-8"))


def _definition(history: list[ev.Event]) -> Any:
    started = history[0]
    assert isinstance(started, ev.WorkflowStarted)
    return golden.GOLDEN[started.workflow_name]


def test_there_are_golden_histories() -> None:
    assert {p.stem for p in GOLDEN_FILES} >= {"score_batch", "fan_out", "race"}


@pytest.mark.parametrize("path", GOLDEN_FILES, ids=lambda p: p.stem)
def test_golden_history_replays(path: Path) -> None:
    history = _history(path)
    replay(history, _definition(history))
    replay(path.read_text(encoding="utf-8"), _definition(history))


@pytest.mark.parametrize("path", GOLDEN_FILES, ids=lambda p: p.stem)
def test_golden_history_ends_the_run(path: Path) -> None:
    history = _history(path)
    started = history[0]
    assert isinstance(started, ev.WorkflowStarted)
    instance = WorkflowInstance(
        _definition(history).fn,
        run_id=started.run_id,
        workflow_id=started.workflow_id,
        workflow_name=started.workflow_name,
    )
    try:
        tail = instance.activate(history)
        assert tail.commands == []
        assert instance.done
    finally:
        instance.close()


@pytest.mark.parametrize("path", GOLDEN_FILES, ids=lambda p: p.stem)
def test_each_activation_reproduces_its_recorded_commands_exactly(path: Path) -> None:
    """Stronger than key matching: arguments, timer deadlines and results are equal too."""
    history = _history(path)
    started = history[0]
    assert isinstance(started, ev.WorkflowStarted)
    for index, marker in enumerate(history):
        if not isinstance(marker, ev.ActivationCompleted):
            continue
        recorded = []
        for event in history[index + 1 :]:
            if event.ROLE != "command":
                break
            recorded.append(dataclasses.replace(event, seq=0, at=0.0))
        # What that activation had seen: inputs that arrived during it are left out.
        seen = [e for e in history[:index] if not (e.ROLE == "input" and e.seq > marker.saw_upto)]
        instance = WorkflowInstance(
            _definition(history).fn,
            run_id=started.run_id,
            workflow_id=started.workflow_id,
            workflow_name=started.workflow_name,
        )
        try:
            tail = instance.activate(seen)
        finally:
            instance.close()
        assert (tail.commands, tail.saw_upto, tail.time) == (
            recorded,
            marker.saw_upto,
            marker.time,
        ), f"activation at seq {marker.seq}"


@pytest.mark.parametrize("path", GOLDEN_FILES, ids=lambda p: p.stem)
def test_golden_files_are_in_the_codec_format(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    history = loads_history(text)
    assert [e.seq for e in history] == list(range(1, len(history) + 1))
    assert loads_history(dumps_history(history)) == history
    # Every recorded field is read back unchanged; fields added since have defaults.
    for body in json.loads(text)["events"]:
        again = encode(decode(body))
        assert {key: again[key] for key in body} == body


def test_the_race_history_has_the_trap1_interleaving() -> None:
    history = _history(GOLDEN_DIR / "race.json")
    late = [
        (event.seq, marker.seq)
        for i, marker in enumerate(history)
        if isinstance(marker, ev.ActivationCompleted)
        for event in history[:i]
        if event.ROLE == "input"
        and event.seq > marker.saw_upto
        and not any(
            isinstance(m, ev.ActivationCompleted) and m.saw_upto >= event.seq for m in history[:i]
        )
    ]
    assert late == [(6, 7)]


def test_the_fan_out_history_cancels_one_timer_and_fires_another() -> None:
    history = _history(GOLDEN_DIR / "fan_out.json")
    cancelled = {e.cmd for e in history if isinstance(e, ev.TimerCancelled)}
    fired = {e.cmd for e in history if isinstance(e, ev.TimerFired)}
    assert len(cancelled) == 1
    assert len(fired) == 1
    assert cancelled.isdisjoint(fired)
    # The task that lost its race against the timer is asked to stop.
    crawl = [e.cmd for e in history if isinstance(e, ev.TaskScheduled) and e.name == "golden.crawl"]
    stopped = [e.cmd for e in history if isinstance(e, ev.TaskCancelRequested)]
    assert stopped == crawl


# -- changed code must not replay -------------------------------------------


@workflow(name="golden.changed.score_batch")
async def score_batch_sleeping_first(batch_id: str, rows: list[int]) -> dict[str, object]:
    await asyncio.sleep(golden.SUMMARY_DELAY)  # moved before the first step
    scores = await golden.score(rows)
    summary: dict[str, object] = await golden.summarize(batch_id, scores)
    return summary


@workflow(name="golden.changed.fan_out")
async def fan_out_without_timeouts(n: int) -> dict[str, object]:
    squares = await asyncio.gather(*(golden.square(i) for i in range(n)))
    quick = await golden.square(n)  # wait_for dropped: one timer fewer
    return {"squares": list(squares), "quick": quick}


@workflow(name="golden.changed.race")
async def race_waiting_for_both() -> list[str]:
    a, b = await asyncio.gather(golden.first(), golden.second())
    return [a, b, await golden.third()]


@pytest.mark.parametrize(
    ("stem", "changed", "expected"),
    [
        (
            "score_batch",
            score_batch_sleeping_first,
            r"TaskScheduled #1 golden\.score\s+TimerStarted",
        ),
        ("fan_out", fan_out_without_timeouts, r"TimerStarted #5\s+\(nothing\)"),
        ("race", race_waiting_for_both, r"TaskScheduled #3 golden\.third\s+\(nothing\)"),
    ],
)
def test_a_changed_workflow_fails_replay(stem: str, changed: Any, expected: str) -> None:
    with pytest.raises(NondeterminismError, match=expected):
        replay((GOLDEN_DIR / f"{stem}.json").read_text(encoding="utf-8"), changed)
