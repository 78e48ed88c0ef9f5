"""The deterministic event loop: timers, asyncio helpers, time and randomness.

Runs are driven through :class:`~._sim.Sim`, which plays the store's part.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import time
import zlib
from collections.abc import Callable

import pytest

import keepgoing
from keepgoing import TaskFailedError, task
from keepgoing._history import events as ev
from keepgoing._runtime.instance import WorkflowInstance
from keepgoing._runtime.loop import WorkflowLoop, current_loop

from .._sim import T0, Sim, commands_of, keys, replay_fresh

MakeSim = Callable[..., Sim]


@task(name="loop.fetch")
def fetch(n: int) -> int:
    return n


@task(name="loop.store")
def store(value: object) -> None:
    return None


@task(name="loop.a")
def step_a() -> str:
    return "a"


@task(name="loop.b")
def step_b() -> str:
    return "b"


@task(name="loop.c")
def step_c() -> str:
    return "c"


class Boom(Exception):
    pass


# -- timers -----------------------------------------------------------------


async def sleeper() -> str:
    await asyncio.sleep(30)
    return "woke"


def test_sleep_starts_a_durable_timer_at_activation_time_plus_delay(make_sim: MakeSim) -> None:
    sim = make_sim(sleeper)
    first = sim.activate()
    assert first.commands == [ev.TimerStarted(cmd=1, fire_at=T0 + 30)]
    assert first.time == T0
    assert first.saw_upto == 1


def test_sleep_resumes_only_when_the_timer_fires(make_sim: MakeSim) -> None:
    async def wf() -> int:
        handle = fetch.submit(1)
        await asyncio.sleep(30)
        return await handle

    sim = make_sim(wf)
    assert keys(sim.activate().commands) == [
        ("TaskScheduled", 1, "loop.fetch"),
        ("TimerStarted", 2, ""),
    ]
    # Nothing new: nothing happens.
    assert sim.activate().commands == []
    # The task finishing does not wake the sleep.
    sim.complete(1, 7)
    quiet = sim.activate()
    assert quiet.commands == []
    assert quiet.delivered == 1
    assert not sim.instance.done
    sim.advance(30)
    sim.fire(2)
    assert sim.activate().commands == [ev.WorkflowCompleted(result=7)]
    assert sim.instance.done


def test_timer_fire_at_uses_the_time_of_the_activation_that_started_it(
    make_sim: MakeSim,
) -> None:
    async def wf() -> None:
        await fetch(1)
        await asyncio.sleep(10)

    sim = make_sim(wf)
    sim.activate()
    sim.advance(100)
    sim.complete(1, 1)
    assert sim.activate().commands == [ev.TimerStarted(cmd=2, fire_at=T0 + 110)]


def test_sleep_zero_or_negative_issues_no_command(make_sim: MakeSim) -> None:
    async def wf() -> str:
        await asyncio.sleep(0)
        await asyncio.sleep(-5)
        return "done"

    sim = make_sim(wf)
    assert sim.activate().commands == [ev.WorkflowCompleted(result="done")]


def test_cancel_of_a_fired_timer_is_not_a_command(make_sim: MakeSim) -> None:
    # asyncio.sleep cancels its handle in a finally even after the timer fired.
    sim = make_sim(sleeper)
    sim.activate()
    sim.fire(1)
    assert sim.activate().commands == [ev.WorkflowCompleted(result="woke")]
    assert commands_of(sim.history, ev.TimerCancelled) == []


def test_wait_for_cancels_its_timer_when_the_task_finishes_first(make_sim: MakeSim) -> None:
    async def wf() -> int:
        return await asyncio.wait_for(fetch(1), timeout=60)

    sim = make_sim(wf)
    assert sim.activate().commands == [
        ev.TaskScheduled(cmd=1, name="loop.fetch", args=[1]),
        ev.TimerStarted(cmd=2, fire_at=T0 + 60),
    ]
    sim.complete(1, 11)
    assert sim.activate().commands == [
        ev.TimerCancelled(cmd=2),
        ev.WorkflowCompleted(result=11),
    ]


def test_a_timer_that_fires_after_its_cancel_is_ignored(make_sim: MakeSim) -> None:
    async def wf() -> int:
        value = await asyncio.wait_for(fetch(1), timeout=60)
        await asyncio.sleep(5)
        return value

    sim = make_sim(wf)
    sim.activate()
    sim.complete(1, 3)
    assert keys(sim.activate().commands) == [("TimerCancelled", 2, ""), ("TimerStarted", 3, "")]
    sim.fire(2)  # the store fired it before the cancel was committed
    late = sim.activate()
    assert late.commands == []
    assert not sim.instance.done
    sim.fire(3)
    assert sim.activate().commands == [ev.WorkflowCompleted(result=3)]


def test_wait_for_raises_timeout_error_in_the_workflow_when_the_timer_fires_first(
    make_sim: MakeSim,
) -> None:
    async def wf() -> str:
        try:
            await asyncio.wait_for(fetch(1), timeout=60)
        except TimeoutError:
            return "timed out"
        return "finished"

    sim = make_sim(wf)
    sim.activate()
    sim.advance(60)
    sim.fire(2)
    # The workflow stopped waiting for the open task: its attempt is asked to stop.
    assert sim.activate().commands == [
        ev.TaskCancelRequested(cmd=1),
        ev.WorkflowCompleted(result="timed out"),
    ]
    # The task's late result reaches nobody and changes nothing.
    sim.complete(1, 5)
    assert sim.activate().commands == []


def test_asyncio_timeout_is_a_durable_timer(make_sim: MakeSim) -> None:
    async def wf() -> str:
        try:
            async with asyncio.timeout(5):
                await fetch(1)
        except TimeoutError:
            return "timed out"
        return "finished"

    sim = make_sim(wf)
    assert keys(sim.activate().commands) == [
        ("TimerStarted", 1, ""),
        ("TaskScheduled", 2, "loop.fetch"),
    ]
    assert sim.history[2] == ev.TimerStarted(seq=3, at=T0, cmd=1, fire_at=T0 + 5)
    sim.fire(1)
    assert sim.activate().commands == [
        ev.TaskCancelRequested(cmd=2),
        ev.WorkflowCompleted(result="timed out"),
    ]


def test_asyncio_timeout_cancels_its_timer_when_the_body_finishes(make_sim: MakeSim) -> None:
    async def wf() -> int:
        async with asyncio.timeout(5):
            return await fetch(1)

    sim = make_sim(wf)
    sim.activate()
    sim.complete(2, 9)
    assert sim.activate().commands == [
        ev.TimerCancelled(cmd=1),
        ev.WorkflowCompleted(result=9),
    ]


def test_timers_fired_together_wake_in_history_order(make_sim: MakeSim) -> None:
    woke: list[str] = []

    async def nap(label: str) -> None:
        await asyncio.sleep(10)
        woke.append(label)

    async def wf() -> list[str]:
        await asyncio.gather(nap("first"), nap("second"))
        return list(woke)

    sim = make_sim(wf)
    assert keys(sim.activate().commands) == [("TimerStarted", 1, ""), ("TimerStarted", 2, "")]
    sim.fire(2)
    sim.fire(1)
    assert sim.activate().commands == [ev.WorkflowCompleted(result=["second", "first"])]


def test_an_infinite_sleep_records_no_timer(make_sim: MakeSim) -> None:
    # It can never fire, and an infinite deadline could not be stored as JSON.
    async def wf() -> int:
        forever = asyncio.create_task(asyncio.sleep(math.inf))
        value = await asyncio.wait_for(fetch(1), timeout=math.inf)
        forever.cancel()
        return value

    sim = make_sim(wf)
    assert keys(sim.activate().commands) == [("TaskScheduled", 1, "loop.fetch")]
    sim.complete(1, 5)
    assert sim.activate().commands == [ev.WorkflowCompleted(result=5)]
    replay_fresh(wf, sim.history)[0].close()


def test_a_nan_delay_is_a_value_error_in_the_workflow(make_sim: MakeSim) -> None:
    async def wf() -> str:
        try:
            await asyncio.sleep(math.nan)
        except ValueError as exc:
            return str(exc)
        return "slept"

    (completed,) = make_sim(wf).activate().commands
    assert isinstance(completed, ev.WorkflowCompleted)
    assert "NaN" in completed.result


# -- gather, create_task, submit --------------------------------------------


async def fan_out() -> list[int]:
    return list(await asyncio.gather(fetch(10), fetch(20), fetch(30)))


@pytest.mark.parametrize("order", [(1, 2, 3), (3, 1, 2), (2, 3, 1)])
def test_gather_schedules_in_argument_order_and_returns_in_order(
    make_sim: MakeSim, order: tuple[int, int, int]
) -> None:
    sim = make_sim(fan_out)
    assert sim.activate().commands == [
        ev.TaskScheduled(cmd=1, name="loop.fetch", args=[10]),
        ev.TaskScheduled(cmd=2, name="loop.fetch", args=[20]),
        ev.TaskScheduled(cmd=3, name="loop.fetch", args=[30]),
    ]
    for cmd in order:
        sim.complete(cmd, cmd * 100)
        sim.activate()
    assert sim.result() == [100, 200, 300]
    replay_fresh(fan_out, sim.history)[0].close()


def test_create_task_interleaving_is_deterministic(make_sim: MakeSim) -> None:
    async def child(yields: int, step: keepgoing.TaskDefinition[[], str]) -> str:
        for _ in range(yields):
            await asyncio.sleep(0)
        return await step()

    async def wf() -> list[str]:
        tasks = [
            asyncio.create_task(child(2, step_a)),
            asyncio.create_task(child(0, step_b)),
            asyncio.create_task(child(1, step_c)),
        ]
        return [await t for t in tasks]

    orders = []
    for _ in range(5):
        sim = make_sim(wf)
        orders.append(keys(sim.activate().commands))
    # FIFO ready queue: b schedules on its first step, c one step later, a last.
    assert orders[0] == [
        ("TaskScheduled", 1, "loop.b"),
        ("TaskScheduled", 2, "loop.c"),
        ("TaskScheduled", 3, "loop.a"),
    ]
    assert all(order == orders[0] for order in orders)


def test_submit_returns_handles_that_await_to_results(make_sim: MakeSim) -> None:
    seen: dict[str, object] = {}

    async def wf() -> list[int]:
        first = fetch.submit(1)
        second = fetch.submit(2)
        seen["cmds"] = (first.cmd, second.cmd)
        seen["names"] = (first.name, second.name)
        seen["before"] = (first.done(), repr(first))
        b = await second
        seen["after"] = (second.done(), second.result(), repr(second))
        return [await first, b]

    sim = make_sim(wf)
    assert keys(sim.activate().commands) == [
        ("TaskScheduled", 1, "loop.fetch"),
        ("TaskScheduled", 2, "loop.fetch"),
    ]
    assert seen["cmds"] == (1, 2)
    assert seen["names"] == ("loop.fetch", "loop.fetch")
    assert seen["before"] == (False, "<TaskHandle loop.fetch #1 pending>")
    sim.complete(2, 20)
    sim.activate()
    assert seen["after"] == (True, 20, "<TaskHandle loop.fetch #2 done>")
    sim.complete(1, 10)
    sim.activate()
    assert sim.result() == [10, 20]


def test_handle_result_before_completion_raises_invalid_state(make_sim: MakeSim) -> None:
    async def wf() -> str:
        handle = fetch.submit(1)
        try:
            handle.result()
        except asyncio.InvalidStateError:
            return "not yet"
        return "unexpected"

    sim = make_sim(wf)
    assert sim.activate().commands[-1] == ev.WorkflowCompleted(result="not yet")


def test_other_asyncio_primitives_work_unchanged(make_sim: MakeSim) -> None:
    async def wf() -> dict[str, object]:
        first = asyncio.ensure_future(fetch(1))
        second = asyncio.ensure_future(fetch(2))
        done, pending = await asyncio.wait(
            [first, second], return_when=asyncio.FIRST_COMPLETED, timeout=100
        )
        queue: asyncio.Queue[int] = asyncio.Queue()
        produced = asyncio.Event()

        async def producer() -> None:
            for i in range(3):
                await queue.put(i)
            produced.set()

        async with asyncio.Lock():
            worker = asyncio.create_task(producer())
            await produced.wait()
        await worker
        items = [queue.get_nowait() for _ in range(queue.qsize())]
        shielded = await asyncio.shield(fetch(3))
        return {
            "first": [t.result() for t in done],
            "pending": len(pending),
            "items": items,
            "shielded": shielded,
        }

    sim = make_sim(wf)
    assert keys(sim.activate().commands) == [
        ("TaskScheduled", 1, "loop.fetch"),
        ("TaskScheduled", 2, "loop.fetch"),
        ("TimerStarted", 3, ""),
    ]
    sim.complete(2, 20)
    assert keys(sim.activate().commands) == [
        ("TimerCancelled", 3, ""),
        ("TaskScheduled", 4, "loop.fetch"),
    ]
    sim.complete(4, 40)
    sim.activate()
    assert sim.result() == {"first": [20], "pending": 1, "items": [0, 1, 2], "shielded": 40}


# -- determinism ------------------------------------------------------------


async def busy_workflow(n: int) -> dict[str, object]:
    first = await asyncio.gather(*(fetch(i) for i in range(n)))
    racer = asyncio.create_task(asyncio.sleep(5))
    try:
        second = await asyncio.wait_for(fetch(99), timeout=30)
    except TimeoutError:
        second = -1
    await racer
    stamp = keepgoing.now().timestamp()
    pick = keepgoing.random()
    await store({"pick": pick, "id": str(keepgoing.uuid4())})
    return {"first": list(first), "second": second, "stamp": stamp}


def _drive_busy_workflow(sim: Sim) -> None:
    sim.activate()  # cmds 1..3 tasks
    sim.advance(1)
    sim.complete(2, "two")
    sim.activate()
    sim.advance(1)
    sim.complete(3, "three")
    sim.complete(1, "one")
    # gather done: fetch(99) is scheduled when called (4), wait_for starts its
    # timer at once (5), and the racer task's sleep starts a step later (6).
    assert keys(sim.activate().commands) == [
        ("TaskScheduled", 4, "loop.fetch"),
        ("TimerStarted", 5, ""),
        ("TimerStarted", 6, ""),
    ]
    sim.advance(5)
    sim.fire(6)
    sim.activate()
    sim.advance(1)
    sim.complete(4, 99)
    assert keys(sim.activate().commands) == [
        ("TimerCancelled", 5, ""),
        ("TaskScheduled", 7, "loop.store"),
    ]
    sim.complete(7, None)
    sim.activate()


def test_the_same_history_replays_to_identical_commands(make_sim: MakeSim) -> None:
    sim = make_sim(busy_workflow, 3)
    _drive_busy_workflow(sim)
    assert sim.result() == {"first": ["one", "two", "three"], "second": 99, "stamp": T0 + 8}
    markers = [i for i, e in enumerate(sim.history) if isinstance(e, ev.ActivationCompleted)]
    for cut in markers:
        # Replaying the history before each marker must produce exactly the
        # commands recorded after it, every time.
        recorded = sim.history[cut + 1 :]
        recorded = recorded[
            : next((i for i, e in enumerate(recorded) if e.ROLE != "command"), None)
        ]
        outputs = []
        for _ in range(20):
            instance, tail = replay_fresh(busy_workflow, sim.history[:cut])
            instance.close()
            outputs.append((tail.commands, tail.saw_upto, tail.time))
        marker = sim.history[cut]
        assert isinstance(marker, ev.ActivationCompleted)
        strip = [_unstamped(c) for c in recorded]
        assert all(out == (strip, marker.saw_upto, marker.time) for out in outputs)


def _unstamped(event: ev.Event) -> ev.Event:
    return dataclasses.replace(event, seq=0, at=0.0)


def test_full_replay_is_silent_and_reaches_the_same_end(make_sim: MakeSim) -> None:
    sim = make_sim(busy_workflow, 2)
    sim.activate()
    sim.complete(1, "x")
    sim.complete(2, "y")
    sim.activate()
    sim.advance(30)
    sim.fire(4)  # the wait_for timer (3 = fetch(99), 5 = the racer's sleep)
    sim.fire(5)
    sim.activate()
    sim.complete(6, None)
    sim.activate()
    assert sim.result() == {"first": ["x", "y"], "second": -1, "stamp": T0 + 30}
    for _ in range(20):
        instance, tail = replay_fresh(busy_workflow, sim.history)
        assert tail.commands == []
        assert instance.done
        instance.close()


# -- time, randomness, ids --------------------------------------------------


async def entropy() -> dict[str, object]:
    before = keepgoing.now()
    values = [keepgoing.random(), keepgoing.random()]
    ids = [keepgoing.uuid4(), keepgoing.uuid4()]
    await fetch(1)
    return {
        "before": before.isoformat(),
        "after": keepgoing.now().isoformat(),
        "tz": str(keepgoing.now().tzinfo),
        "loop_time": asyncio.get_running_loop().time(),
        "values": values,
        "ids": [str(i) for i in ids],
        "versions": [i.version for i in ids],
    }


def _entropy_run(make_sim: MakeSim, run_id: str) -> Sim:
    sim = make_sim(entropy, run_id=run_id)
    sim.activate()
    sim.advance(42)
    sim.complete(1, None)
    sim.activate()
    return sim


def test_now_random_and_uuid4_are_replayed_identically(make_sim: MakeSim) -> None:
    sim = _entropy_run(make_sim, "run-a")
    recorded = sim.result()
    assert recorded["before"] == "2026-01-01T00:00:00+00:00"
    assert recorded["after"] == "2026-01-01T00:00:42+00:00"
    assert recorded["tz"] == "UTC"
    assert recorded["loop_time"] == T0 + 42
    assert recorded["versions"] == [4, 4]
    assert len(set(recorded["ids"])) == 2
    assert recorded["values"][0] != recorded["values"][1]
    # Replay everything but the final activation: the code recomputes the result.
    last_marker = max(i for i, e in enumerate(sim.history) if isinstance(e, ev.ActivationCompleted))
    for _ in range(3):
        instance, tail = replay_fresh(entropy, sim.history[:last_marker], run_id="run-a")
        instance.close()
        assert tail.commands == [ev.WorkflowCompleted(result=recorded)]


def test_random_and_uuid4_differ_between_run_ids(make_sim: MakeSim) -> None:
    a = _entropy_run(make_sim, "run-a").result()
    b = _entropy_run(make_sim, "run-b").result()
    assert a["values"] != b["values"]
    assert a["ids"] != b["ids"]
    assert a["before"] == b["before"]  # time comes from history, not the run id


def test_run_ids_whose_crc32_collide_still_get_different_values() -> None:
    # These two run ids have the same CRC-32; the seed must use the whole id.
    ids = ("55cea0d4501943f79390a3421fff408f", "fd19c5765a8540228d493367b4f61899")
    assert zlib.crc32(ids[0].encode()) == zlib.crc32(ids[1].encode())
    instances = [
        WorkflowInstance(sleeper, run_id=i, workflow_id="w", workflow_name="wf") for i in ids
    ]
    try:
        assert instances[0].uuid4() != instances[1].uuid4()
        assert instances[0].random() != instances[1].random()
    finally:
        for instance in instances:
            instance.close()


def test_time_is_the_newest_delivered_input(make_sim: MakeSim) -> None:
    stamps: list[float] = []

    async def wf() -> None:
        stamps.append(keepgoing.now().timestamp())
        await asyncio.gather(fetch(1), fetch(2))
        stamps.append(keepgoing.now().timestamp())
        stamps.append(asyncio.get_running_loop().time())

    sim = make_sim(wf)
    sim.activate()
    sim.advance(10)
    sim.complete(2, None)
    sim.advance(10)
    sim.complete(1, None)
    sim.advance(1000)  # the worker's clock is irrelevant: only inputs' times count
    act = sim.activate()
    assert act.time == T0 + 20
    assert stamps == [T0, T0 + 20, T0 + 20]
    assert sim.history[-2] == ev.ActivationCompleted(
        seq=sim.history[-2].seq, at=T0 + 1020, saw_upto=6, time=T0 + 20
    )


def test_time_never_goes_back(make_sim: MakeSim) -> None:
    stamps: list[float] = []

    async def wf() -> None:
        await fetch(1)
        stamps.append(asyncio.get_running_loop().time())

    sim = make_sim(wf, start=T0 + 100)
    sim.activate()
    sim.now = T0  # an input stamped earlier than the start (clock skew between writers)
    sim.complete(1, None)
    sim.activate()
    assert stamps == [T0 + 100]


# -- failures ---------------------------------------------------------------


def test_a_failed_task_raises_task_failed_error_in_the_workflow(make_sim: MakeSim) -> None:
    async def wf() -> dict[str, object]:
        try:
            await fetch(1)
        except TaskFailedError as exc:
            return {
                "task": exc.task_name,
                "type": exc.error_type,
                "message": exc.message,
                "attempts": exc.attempts,
                "code": exc.code,
                "str": str(exc),
            }
        return {}

    sim = make_sim(wf)
    sim.activate()
    sim.fail(1, "loop.fetch", error_type="KeyError", message="'missing'", attempts=3)
    sim.activate()
    assert sim.result() == {
        "task": "loop.fetch",
        "type": "KeyError",
        "message": "'missing'",
        "attempts": 3,
        "code": "task_failed",
        "str": "task 'loop.fetch' failed after 3 attempt(s): KeyError: 'missing'",
    }


def test_an_uncaught_task_failure_fails_the_workflow(make_sim: MakeSim) -> None:
    async def wf() -> None:
        await fetch(1)

    sim = make_sim(wf)
    sim.activate()
    sim.fail(1, "loop.fetch", error_type="TimeoutError", message="too slow", attempts=1)
    (failed,) = sim.activate().commands
    assert isinstance(failed, ev.WorkflowFailed)
    assert failed.error.type == "keepgoing.errors.TaskFailedError"
    assert "TimeoutError: too slow" in failed.error.message
    assert isinstance(sim.instance.failure, TaskFailedError)


def test_a_raising_workflow_emits_workflow_failed_with_error_info(make_sim: MakeSim) -> None:
    async def wf(x: int) -> None:
        await fetch(x)
        raise Boom(f"bad value {x}")

    sim = make_sim(wf, 4)
    sim.activate()
    sim.complete(1, 4)
    (failed,) = sim.activate().commands
    assert isinstance(failed, ev.WorkflowFailed)
    assert failed.error.type == f"{Boom.__module__}.Boom"
    assert failed.error.message == "bad value 4"
    assert failed.error.traceback is not None
    assert "Boom: bad value 4" in failed.error.traceback
    assert "raise Boom" in failed.error.traceback
    assert sim.instance.done
    assert isinstance(sim.instance.failure, Boom)


def test_builtin_errors_are_named_without_a_module(make_sim: MakeSim) -> None:
    async def wf() -> None:
        raise KeyError("k")

    (failed,) = make_sim(wf).activate().commands
    assert isinstance(failed, ev.WorkflowFailed)
    assert failed.error.type == "KeyError"


def test_a_cancelled_error_escaping_the_workflow_fails_the_run(make_sim: MakeSim) -> None:
    # Without a terminal command the run would wait forever with nothing scheduled.
    async def wf() -> str:
        child = asyncio.create_task(asyncio.sleep(10))
        await asyncio.sleep(0)
        child.cancel()
        await child
        return "unreachable"

    sim = make_sim(wf)
    commands = sim.activate().commands
    assert keys(commands) == [
        ("TimerStarted", 1, ""),
        ("TimerCancelled", 1, ""),
        ("WorkflowFailed", 0, ""),
    ]
    failed = commands[-1]
    assert isinstance(failed, ev.WorkflowFailed)
    assert failed.error.type == "asyncio.exceptions.CancelledError"
    assert sim.instance.done
    instance, tail = replay_fresh(wf, sim.history)
    assert tail.commands == []
    instance.close()


def test_a_non_json_result_fails_the_workflow_naming_the_result(make_sim: MakeSim) -> None:
    async def wf() -> object:
        return {"ok": {1, 2}}

    (failed,) = make_sim(wf, workflow_name="setter").activate().commands
    assert isinstance(failed, ev.WorkflowFailed)
    assert failed.error.type == "keepgoing.errors.PayloadError"
    assert "the result of workflow 'setter'" in failed.error.message
    assert "set" in failed.error.message


def test_blocking_io_helpers_are_refused_inside_a_workflow(make_sim: MakeSim) -> None:
    async def wf() -> None:
        await asyncio.get_running_loop().run_in_executor(None, time.time)

    (failed,) = make_sim(wf).activate().commands
    assert isinstance(failed, ev.WorkflowFailed)
    assert failed.error.type == "RuntimeError"
    assert "@task" in failed.error.message


def test_a_busy_looping_workflow_hits_the_step_cap(make_sim: MakeSim) -> None:
    async def spin() -> None:
        while True:
            await asyncio.sleep(0)

    sim = make_sim(spin)
    started = time.perf_counter()
    with pytest.raises(RuntimeError, match="busy-loop"):
        sim.activate()
    assert time.perf_counter() - started < 30


def test_the_loop_is_only_running_inside_an_activation() -> None:
    seen: list[bool] = []

    async def wf() -> None:
        loop = asyncio.get_running_loop()
        seen.append(isinstance(loop, WorkflowLoop) and loop.is_running())

    instance = WorkflowInstance(wf, run_id="r", workflow_id="w", workflow_name="wf")
    try:
        instance.activate(
            [
                ev.WorkflowStarted(
                    seq=1,
                    at=T0,
                    workflow_name="wf",
                    workflow_id="w",
                    run_id="r",
                    input={"args": [], "kwargs": {}},
                    code_version="x",
                )
            ]
        )
        assert seen == [True]
        assert not instance.loop.is_running()
        assert current_loop() is None
    finally:
        instance.close()
    assert instance.loop.is_closed()


def test_closing_an_instance_closes_its_own_pending_tasks_and_no_others(
    make_sim: MakeSim, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Eviction closes every coroutine the run left pending (its main task, a child
    task, a gather's), each running its ``finally``; it reads the tasks of its own
    loop only, never every task of the process (which made it cost O(all runs))."""
    closed: list[str] = []

    async def child(name: str) -> int:
        try:
            return await fetch(1)
        finally:
            closed.append(name)

    async def wf() -> list[int]:
        try:
            spare = asyncio.create_task(child("child"))
            both = await asyncio.gather(child("gathered"), spare)
            return list(both)
        finally:
            closed.append("main")

    sim = make_sim(wf)
    assert keys(sim.activate().commands) == [
        ("TaskScheduled", 1, "loop.fetch"),
        ("TaskScheduled", 2, "loop.fetch"),
    ]

    def walked(*args: object) -> object:
        raise AssertionError("close() walked every task of the process")

    monkeypatch.setattr(asyncio, "all_tasks", walked)
    sim.instance.close()
    assert sorted(closed) == ["child", "gathered", "main"]


def test_a_loop_keeps_no_more_than_twice_its_live_tasks(make_sim: MakeSim) -> None:
    """A run that makes a thousand short tasks does not keep them all for its close."""

    async def quick(i: int) -> int:
        return i

    async def wf() -> int:
        total = 0
        for i in range(1000):
            total += await asyncio.create_task(quick(i))
        return total + await fetch(1)

    sim = make_sim(wf)
    assert keys(sim.activate().commands) == [("TaskScheduled", 1, "loop.fetch")]
    kept = sim.instance.loop._tasks
    assert len(kept) <= 2 * 64
    assert [t for t in sim.instance.loop.tasks()] == [sim.instance._main]
    sim.instance.close()
