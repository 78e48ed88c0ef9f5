"""Replay: matching commands to history, NondeterminismError, and the Trap 1 boundary."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from keepgoing import KeepgoingError, NondeterminismError, task, workflow
from keepgoing._history import events as ev
from keepgoing._history.codec import dumps_history
from keepgoing.testing import replay

from .._sim import T0, Sim, keys, replay_fresh

MakeSim = Callable[..., Sim]


@task(name="replay.a")
def step_a() -> str:
    return "a"


@task(name="replay.b")
def step_b() -> str:
    return "b"


@task(name="replay.c")
def step_c() -> str:
    return "c"


@task(name="replay.echo")
def echo(value: int) -> int:
    return value


async def calls_a() -> str:
    return await step_a()


async def calls_b() -> str:
    return await step_b()


async def calls_a_then_b() -> str:
    await step_a()
    return await step_b()


async def calls_a_and_sleeps() -> str:
    await asyncio.sleep(1)
    return await step_a()


def _finished_run(make_sim: MakeSim, fn: Callable[..., object]) -> Sim:
    sim = make_sim(fn)
    sim.activate()
    sim.complete(1, "a")
    sim.activate()
    return sim


# -- mismatches -------------------------------------------------------------


def test_a_different_task_name_raises_with_a_diff_naming_both(make_sim: MakeSim) -> None:
    sim = _finished_run(make_sim, calls_a)
    with pytest.raises(NondeterminismError) as caught:
        replay_fresh(calls_b, sim.history)
    message = str(caught.value)
    assert "TaskScheduled #1 replay.a" in message
    assert "TaskScheduled #1 replay.b" in message
    assert "! TaskScheduled #1 replay.a" in message  # the differing line is flagged
    assert "seq 2" in message  # the marker where the paths part
    assert "blocked" in message
    assert isinstance(caught.value, KeepgoingError)
    assert caught.value.code == "nondeterminism"


def test_an_extra_command_in_code_raises(make_sim: MakeSim) -> None:
    sim = _finished_run(make_sim, calls_a)  # a, then WorkflowCompleted
    with pytest.raises(NondeterminismError) as caught:
        replay_fresh(calls_a_then_b, sim.history)
    message = str(caught.value)
    assert "WorkflowCompleted" in message
    assert "TaskScheduled #2 replay.b" in message


def test_a_missing_command_in_code_raises(make_sim: MakeSim) -> None:
    sim = make_sim(calls_a_then_b)
    sim.activate()
    sim.complete(1, "a")
    sim.activate()
    sim.complete(2, "b")
    sim.activate()

    async def stops_early() -> str:
        await step_a()
        return "done"

    with pytest.raises(NondeterminismError) as caught:
        replay_fresh(stops_early, sim.history)
    message = str(caught.value)
    assert "TaskScheduled #2 replay.b" in message
    assert "WorkflowCompleted" in message


def test_a_command_recorded_but_no_longer_produced_shows_nothing(make_sim: MakeSim) -> None:
    sim = make_sim(calls_a_then_b)
    sim.activate()
    sim.complete(1, "a")
    sim.activate()  # TaskScheduled b; the run is not finished

    async def waits_on_a_only() -> str:
        await step_a()
        await asyncio.Future()  # never resolved
        return "never"

    with pytest.raises(NondeterminismError, match=r"replay\.b\s+\(nothing\)"):
        replay_fresh(waits_on_a_only, sim.history)


def test_a_timer_instead_of_a_task_raises(make_sim: MakeSim) -> None:
    sim = _finished_run(make_sim, calls_a)
    with pytest.raises(NondeterminismError) as caught:
        replay_fresh(calls_a_and_sleeps, sim.history)
    assert "TimerStarted #1" in str(caught.value)


def test_changed_arguments_alone_are_not_a_mismatch(make_sim: MakeSim) -> None:
    # Commands match by (kind, sequence, name): arguments are data, not the path.
    async def echo_one() -> int:
        return await echo(1)

    async def echo_two() -> int:
        return await echo(2)

    sim = make_sim(echo_one)
    sim.activate()
    sim.complete(1, 1)
    sim.activate()
    instance, tail = replay_fresh(echo_two, sim.history)
    assert tail.commands == []
    assert instance.done
    instance.close()


def test_a_different_ending_raises(make_sim: MakeSim) -> None:
    sim = _finished_run(make_sim, calls_a)

    async def fails_after_a() -> str:
        await step_a()
        raise RuntimeError("changed")

    with pytest.raises(NondeterminismError, match="WorkflowFailed"):
        replay_fresh(fails_after_a, sim.history)


# -- Trap 1: an input that arrives while an activation runs -----------------


async def race() -> list[str]:
    first_handle = step_a.submit()
    second_handle = step_b.submit()
    first = await first_handle
    if second_handle.done():
        return [first, second_handle.result(), "together"]
    third = await step_c()
    return [first, await second_handle, third]


def _trap1_history() -> list[ev.Event]:
    """Written out by hand: b's result (seq 6) lands during the activation that saw up to 5."""
    started = ev.WorkflowStarted(
        seq=1,
        at=T0,
        workflow_name="race",
        workflow_id="wf-1",
        run_id="run-1",
        input={"args": [], "kwargs": {}},
        code_version="x",
    )
    return [
        started,
        ev.ActivationCompleted(seq=2, at=T0, saw_upto=1, time=T0),
        ev.TaskScheduled(seq=3, at=T0, cmd=1, name="replay.a"),
        ev.TaskScheduled(seq=4, at=T0, cmd=2, name="replay.b"),
        ev.TaskCompleted(seq=5, at=T0 + 1, cmd=1, result="A", attempt=1),
        ev.TaskCompleted(seq=6, at=T0 + 2, cmd=2, result="B", attempt=1),
        ev.ActivationCompleted(seq=7, at=T0 + 2, saw_upto=5, time=T0 + 1),
        ev.TaskScheduled(seq=8, at=T0 + 2, cmd=3, name="replay.c"),
        # The run stayed runnable: the next activation delivers seq 6.
        ev.ActivationCompleted(seq=9, at=T0 + 3, saw_upto=6, time=T0 + 2),
        ev.TaskCompleted(seq=10, at=T0 + 4, cmd=3, result="C", attempt=1),
        ev.ActivationCompleted(seq=11, at=T0 + 4, saw_upto=10, time=T0 + 4),
        ev.WorkflowCompleted(seq=12, at=T0 + 4, result=["A", "B", "C"]),
    ]


def test_trap1_live_run_produces_the_hand_built_history(make_sim: MakeSim) -> None:
    sim = make_sim(race, workflow_name="race")
    sim.activate()
    sim.advance(1)
    sim.complete(1, "A")
    sim.advance(1)
    # b completes while the activation that saw a's result is running.
    act = sim.activate(arriving=[ev.TaskCompleted(cmd=2, result="B", attempt=1)])
    assert keys(act.commands) == [("TaskScheduled", 3, "replay.c")]
    assert act.saw_upto == 5
    sim.advance(1)
    # The cached instance picks up seq 6 on its next activation.
    act = sim.activate()
    assert act.commands == []
    assert act.delivered == 1
    assert act.saw_upto == 6
    sim.advance(1)
    sim.complete(3, "C")
    sim.activate()
    assert sim.result() == ["A", "B", "C"]
    assert sim.history == _trap1_history()


def test_trap1_replay_delivers_the_late_input_at_the_next_marker() -> None:
    history = _trap1_history()
    instance, tail = replay_fresh(race, history, workflow_name="race")
    try:
        assert tail.commands == []
        assert instance.done
        assert instance.failure is None
        assert instance.last_input_seq == 10
    finally:
        instance.close()
    replay(history, workflow(name="replay.race")(race))


def test_trap1_replay_of_the_prefix_reproduces_the_final_commands() -> None:
    history = _trap1_history()
    instance, tail = replay_fresh(race, history[:10], workflow_name="race")
    try:
        assert tail.commands == [ev.WorkflowCompleted(result=["A", "B", "C"])]
        assert tail.saw_upto == 10
        assert tail.time == T0 + 4
    finally:
        instance.close()


def test_delivering_in_plain_seq_order_would_take_the_other_path() -> None:
    # If the marker had seen seq 6, the code returns "together": the boundary matters.
    history = _trap1_history()
    history[6] = ev.ActivationCompleted(seq=7, at=T0 + 2, saw_upto=6, time=T0 + 2)
    with pytest.raises(
        NondeterminismError, match=r"TaskScheduled #3 replay\.c\s+WorkflowCompleted"
    ):
        replay_fresh(race, history[:8], workflow_name="race")


# -- cached instances -------------------------------------------------------


def test_a_cached_instance_catches_up_over_other_workers_markers() -> None:
    history = _trap1_history()
    instance, tail = replay_fresh(race, history[:4], workflow_name="race")
    try:
        assert tail.commands == []
        assert instance.position == 4
        # Another worker ran the next activations; this instance resumes from its marker.
        rest = [e for e in history if e.seq > instance.last_input_seq]
        tail = instance.activate(rest)
        assert tail.commands == []
        assert instance.done
        assert instance.position == 12
    finally:
        instance.close()


def test_an_instance_given_history_it_already_consumed_does_nothing() -> None:
    history = _trap1_history()
    instance, tail = replay_fresh(race, history[:8], workflow_name="race")
    try:
        # Seq 6 arrived during the last recorded activation: the live tail delivers it.
        assert (tail.commands, tail.delivered, tail.saw_upto) == ([], 1, 6)
        assert instance.position == 8
        for _ in range(2):
            again = instance.activate(history[:8])
            assert (again.commands, again.delivered, again.saw_upto) == ([], 0, 6)
    finally:
        instance.close()


def test_inputs_after_the_last_marker_are_delivered_live(make_sim: MakeSim) -> None:
    sim = make_sim(calls_a_then_b)
    sim.activate()
    sim.complete(1, "a")
    instance, tail = replay_fresh(calls_a_then_b, sim.history)
    try:
        assert keys(tail.commands) == [("TaskScheduled", 2, "replay.b")]
        assert tail.saw_upto == 4
        assert tail.delivered == 1
    finally:
        instance.close()
    # The cached instance of the live run produces the same commands.
    assert keys(sim.activate().commands) == [("TaskScheduled", 2, "replay.b")]


# -- keepgoing.testing.replay -----------------------------------------------


def test_testing_replay_accepts_events_and_json_text(make_sim: MakeSim) -> None:
    sim = _finished_run(make_sim, calls_a)
    definition = workflow(name="replay.calls_a")(calls_a)
    replay(sim.history, definition)
    replay(dumps_history(sim.history), definition)
    replay(dumps_history(sim.history).encode(), definition)
    with pytest.raises(NondeterminismError):
        replay(sim.history, workflow(name="replay.calls_b")(calls_b))


def test_testing_replay_needs_a_workflow_started_event() -> None:
    definition = workflow(name="replay.calls_a")(calls_a)
    with pytest.raises(ValueError, match="WorkflowStarted"):
        replay([ev.ActivationCompleted(seq=1, saw_upto=0, time=T0)], definition)
