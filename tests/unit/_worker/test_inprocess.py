"""The in-process engine: ``asyncio.run(my_workflow(...))`` on SQLite in memory."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from datetime import timedelta

import pytest

import keepgoing
from keepgoing import TaskFailedError, task, workflow
from keepgoing.testing import DEFAULT_START, FakeClock, fake_clock

# -- the DESIGN section 1 example --------------------------------------------


@task(name="inproc.score", retries=2, retry_delay="30s", timeout="5m")
def score(rows: list[int]) -> list[float]:
    return [round(row * 0.1, 2) for row in rows]


@task(name="inproc.summarize")
def summarize(batch_id: str, scores: list[float]) -> dict[str, object]:
    return {
        "batch_id": batch_id,
        "rows": len(scores),
        "mean_score": sum(scores) / len(scores) if scores else None,
    }


@workflow(name="inproc.score_batch")
async def score_batch(batch_id: str, rows: list[int]) -> dict[str, object]:
    scores = await score(rows)
    await asyncio.sleep(3600)  # a durable timer
    return await summarize(batch_id, scores)


@pytest.fixture
def clock() -> Iterator[FakeClock]:
    with fake_clock() as fake:
        yield fake


def test_score_batch_finishes_at_once_under_a_fake_clock(clock: FakeClock) -> None:
    started = time.perf_counter()
    result = asyncio.run(score_batch("local-batch", [2, 4, 6]))
    assert time.perf_counter() - started < 10
    assert result == {"batch_id": "local-batch", "rows": 3, "mean_score": pytest.approx(0.4)}
    assert clock.now() == pytest.approx(DEFAULT_START + 3600)


async def test_awaiting_a_workflow_inside_a_running_loop(clock: FakeClock) -> None:
    result = await score_batch("awaited", [10])
    assert result == {"batch_id": "awaited", "rows": 1, "mean_score": 1.0}


# -- durable time -----------------------------------------------------------


@workflow(name="inproc.two_days")
async def two_days() -> dict[str, float]:
    before = keepgoing.now()
    await asyncio.sleep(timedelta(days=2).total_seconds())
    after = keepgoing.now()
    return {"before": before.timestamp(), "after": after.timestamp()}


def test_a_two_day_sleep_finishes_in_milliseconds(clock: FakeClock) -> None:
    started = time.perf_counter()
    result = asyncio.run(two_days())
    assert time.perf_counter() - started < 10
    assert result["before"] == DEFAULT_START
    assert result["after"] - result["before"] == pytest.approx(2 * 86_400)
    assert clock.now() == pytest.approx(DEFAULT_START + 2 * 86_400)


def test_fake_clock_start_is_configurable() -> None:
    with fake_clock(start=1_000_000.0) as clock:
        result = asyncio.run(two_days())
    assert result["before"] == 1_000_000.0
    assert clock.now() == pytest.approx(1_000_000.0 + 2 * 86_400)


def test_fake_clock_moves_only_forward() -> None:
    clock = FakeClock(start=100.0)
    clock.advance(5)
    clock.jump_to(50)  # the past: no-op
    assert clock.now() == 105.0
    clock.jump_to(200)
    assert (clock.now(), clock.monotonic()) == (200.0, 100.0)
    with pytest.raises(ValueError, match="back"):
        clock.advance(-1)


# -- retries ----------------------------------------------------------------

attempts_seen: dict[str, list[str]] = {}


@task(name="inproc.flaky", retries=2, retry_delay="10s")
def flaky(key: str, failures: int) -> str:
    seen = attempts_seen.setdefault(key, [])
    seen.append(keepgoing.operation_id())
    if len(seen) <= failures:
        raise ConnectionError(f"attempt {len(seen)} of {key} failed")
    return f"ok after {len(seen)}"


@workflow(name="inproc.uses_flaky")
async def uses_flaky(key: str, failures: int) -> dict[str, object]:
    started = keepgoing.now()
    value: object
    try:
        value = await flaky(key, failures)
    except TaskFailedError as exc:
        value = {"type": exc.error_type, "message": exc.message, "attempts": exc.attempts}
    waited = (keepgoing.now() - started).total_seconds()
    return {"value": value, "waited": waited}


@workflow(name="inproc.flaky_uncaught")
async def flaky_uncaught(key: str) -> str:
    return await flaky(key, 99)


def test_a_task_failing_twice_then_succeeding_is_retried(clock: FakeClock) -> None:
    key = "twice"
    attempts_seen.pop(key, None)
    result = asyncio.run(uses_flaky(key, 2))
    assert result["value"] == "ok after 3"
    # Backoff: 10 s then 20 s, each with +/-20% jitter, skipped by the fake clock.
    assert 24 <= float(result["waited"]) <= 36  # type: ignore[arg-type]
    ids = attempts_seen[key]
    assert len(ids) == 3
    assert len(set(ids)) == 1  # operation_id() is stable across retries
    assert ids[0].startswith("op-")


def test_a_task_that_exhausts_its_retries_raises_task_failed_error(clock: FakeClock) -> None:
    attempts_seen.pop("always", None)
    result = asyncio.run(uses_flaky("always", 99))
    assert result["value"] == {
        "type": "ConnectionError",
        "message": "attempt 3 of always failed",
        "attempts": 3,
    }
    assert len(attempts_seen["always"]) == 3


def test_an_uncaught_task_failure_is_raised_by_asyncio_run(clock: FakeClock) -> None:
    with pytest.raises(TaskFailedError) as caught:
        asyncio.run(flaky_uncaught("uncaught"))
    assert caught.value.task_name == "inproc.flaky"
    assert caught.value.error_type == "ConnectionError"
    assert caught.value.attempts == 3


class LedgerError(Exception):
    def __init__(self, account: str) -> None:
        super().__init__(f"account {account} is closed")
        self.account = account


@workflow(name="inproc.raises")
async def raises(account: str) -> None:
    await score([1])
    raise LedgerError(account)


def test_a_workflow_exception_is_raised_as_the_same_type() -> None:
    with pytest.raises(LedgerError, match="account acme is closed") as caught:
        asyncio.run(raises("acme"))
    assert caught.value.account == "acme"


# -- timeouts ---------------------------------------------------------------


@task(name="inproc.slow", timeout="50ms")
async def slow() -> str:
    await asyncio.sleep(10)
    return "too late"


@workflow(name="inproc.uses_slow")
async def uses_slow() -> dict[str, object]:
    try:
        return {"value": await slow()}
    except TaskFailedError as exc:
        return {"type": exc.error_type, "message": exc.message, "attempts": exc.attempts}


def test_a_task_timeout_fails_the_attempt_with_timeout_error() -> None:
    # The real clock: the attempt's timeout is enforced by cancelling the coroutine.
    started = time.perf_counter()
    result = asyncio.run(uses_slow())
    assert time.perf_counter() - started < 5
    assert result["type"] == "TimeoutError"
    assert result["attempts"] == 1
    assert "timeout" in str(result["message"])


@task(name="inproc.echo")
async def echo(value: int) -> int:
    return value


@workflow(name="inproc.races_a_timer")
async def races_a_timer() -> list[object]:
    out: list[object] = [await asyncio.wait_for(echo(1), timeout=3600)]
    try:
        async with asyncio.timeout(60):
            await asyncio.sleep(120)
    except TimeoutError:
        out.append("timed out")
    out.extend(await asyncio.gather(echo(2), echo(3), echo(4)))
    return out


def test_workflow_timeouts_in_process(clock: FakeClock) -> None:
    assert asyncio.run(races_a_timer()) == [1, "timed out", 2, 3, 4]
    assert clock.now() == pytest.approx(DEFAULT_START + 60)


# -- nesting ----------------------------------------------------------------


@workflow(name="inproc.child")
async def child(n: int) -> dict[str, object]:
    doubled = await echo(n * 2)
    return {"doubled": doubled, "workflow_id": keepgoing.current_workflow_id()}


@workflow(name="inproc.parent")
async def parent(n: int) -> dict[str, object]:
    inner = await child(n)
    return {"inner": inner, "workflow_id": keepgoing.current_workflow_id()}


def test_awaiting_a_workflow_inside_a_workflow_runs_it_inline(clock: FakeClock) -> None:
    result = asyncio.run(parent(21))
    assert result["inner"]["doubled"] == 42  # type: ignore[index]
    # Inline: the child runs as part of the parent's run, with the parent's id.
    assert result["inner"]["workflow_id"] == result["workflow_id"]  # type: ignore[index]
    assert str(result["workflow_id"]).startswith("inproc.parent-")


def test_the_fake_clock_is_scoped_to_its_block() -> None:
    with fake_clock():
        pass
    started = time.time()
    result = asyncio.run(echo_workflow(5))
    assert result["value"] == 5
    assert abs(float(result["now"]) - started) < 60  # type: ignore[arg-type]


@workflow(name="inproc.echo_workflow")
async def echo_workflow(n: int) -> dict[str, object]:
    return {"value": await echo(n), "now": keepgoing.now().timestamp()}
