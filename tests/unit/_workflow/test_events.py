"""External events: ``wait_for_event`` and ``Client.publish_event`` on a SQLite store.

The durable-execution notes ask for: the wait's type, correlation id and
deadline persisted; incoming events saved durably and matched to the run's
wait; repeated events tolerated; an event that arrives before the wait
matched when the wait starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import keepgoing
from keepgoing import (
    PayloadError,
    WorkflowMessageTimeoutError,
    wait_for_event,
    wait_for_message,
    workflow,
)
from keepgoing._history import events as ev
from keepgoing.errors import PayloadTooLargeError
from keepgoing.testing import fake_clock

from .._messaging_support import Runs, count_rows, of_type, wait_until

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "kg.db"


@pytest.fixture
def client(db: Path) -> Iterator[keepgoing.Client]:
    with keepgoing.Client(store=f"sqlite:///{db}") as c:
        yield c


@pytest.fixture
def runs(db: Path) -> Iterator[Runs]:
    made = Runs(f"sqlite:///{db}")
    try:
        yield made
    finally:
        made.close()


def as_dict(event: keepgoing.ExternalEvent) -> dict[str, Any]:
    return {
        "event_id": event.event_id,
        "event_type": event.event_type,
        "correlation_id": event.correlation_id,
        "payload": event.payload,
        "published_at": event.published_at.timestamp(),
    }


@workflow(name="tev.await_payment")
async def await_payment(order: str, timeout: float | None = None) -> dict[str, Any]:
    return as_dict(await wait_for_event("payment", order, timeout=timeout))


@workflow(name="tev.await_twice")
async def await_twice(order: str, second_timeout: float) -> list[Any]:
    """The first ``payment`` event for ``order``, then whether a second one comes."""
    first = await wait_for_event("payment", order)
    try:
        second = await wait_for_event("payment", order, timeout=second_timeout)
    except WorkflowMessageTimeoutError:
        return [first.payload, "no second event"]
    return [first.payload, second.payload]


@workflow(name="tev.timeout_then_late")
async def timeout_then_late(order: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    try:
        await wait_for_event("payment", order, timeout=0.2)
        out["first"] = "received"
    except WorkflowMessageTimeoutError as exc:
        out["first"] = "timeout"
        out["is_timeout_error"] = isinstance(exc, TimeoutError)
    await wait_for_message("go")  # the late event is published meanwhile
    out["second"] = (await wait_for_event("payment", order, timeout=10)).payload
    return out


def event_waits(client: keepgoing.Client, workflow_id: str) -> list[ev.EventWaitStarted]:
    return of_type(client.history(workflow_id), ev.EventWaitStarted)


def test_a_published_event_ends_the_matching_wait(runs: Runs, client: keepgoing.Client) -> None:
    run = runs.start(await_payment, {"order": "o-1"}).drive()
    wait_until(lambda: event_waits(client, run.workflow_id), what="the event wait")
    (wait,) = event_waits(client, run.workflow_id)
    assert (wait.event_type, wait.correlation_id, wait.deadline) == ("payment", "o-1", None)
    client.publish_event("payment", "o-2", {"amount": 1})  # another correlation id: ignored
    before = time.time()
    event_id = client.publish_event("payment", "o-1", {"amount": 42}, event_id="evt-1")
    got = run.join()
    assert event_id == "evt-1"
    assert got["event_id"] == "evt-1"
    assert (got["event_type"], got["correlation_id"]) == ("payment", "o-1")
    assert got["payload"] == {"amount": 42}
    assert before - 1 <= got["published_at"] <= time.time() + 1
    (received,) = of_type(client.history(run.workflow_id), ev.EventReceived)
    assert (received.cmd, received.event_id) == (wait.cmd, "evt-1")


def test_an_event_published_twice_with_one_id_is_delivered_once(
    runs: Runs, client: keepgoing.Client, db: Path
) -> None:
    run = runs.start(await_twice, {"order": "o-1", "second_timeout": 0.3}).drive()
    wait_until(lambda: event_waits(client, run.workflow_id), what="the event wait")
    first = client.publish_event("payment", "o-1", {"try": 1}, event_id="evt-dup")
    again = client.publish_event("payment", "o-1", {"try": 2}, event_id="evt-dup")
    assert first == again == "evt-dup"
    assert run.join() == [{"try": 1}, "no second event"]
    received = of_type(client.history(run.workflow_id), ev.EventReceived)
    assert [(r.event_id, r.payload) for r in received] == [("evt-dup", {"try": 1})]
    assert count_rows(db, "events") == 1


def test_a_redelivery_before_the_wait_is_also_delivered_once(
    runs: Runs, client: keepgoing.Client
) -> None:
    run = runs.start(await_twice, {"order": "o-1", "second_timeout": 0.3})
    for attempt in range(3):  # a publisher retrying its delivery
        client.publish_event("payment", "o-1", {"try": attempt}, event_id="evt-retried")
    assert run.drive().join() == [{"try": 0}, "no second event"]
    assert len(of_type(client.history(run.workflow_id), ev.EventReceived)) == 1


def test_an_event_published_before_the_wait_is_matched_when_it_starts(
    runs: Runs, client: keepgoing.Client
) -> None:
    client.publish_event("payment", "o-early", {"amount": 7}, event_id="evt-early")
    run = runs.start(await_payment, {"order": "o-early"})
    assert event_waits(client, run.workflow_id) == []  # no wait exists yet
    got = run.drive().join()
    assert (got["event_id"], got["payload"]) == ("evt-early", {"amount": 7})


def test_events_published_before_the_waits_are_taken_oldest_first(
    runs: Runs, client: keepgoing.Client
) -> None:
    for n in range(3):
        client.publish_event("payment", "o-3", n, event_id=f"evt-{n}")
    run = runs.start(await_twice, {"order": "o-3", "second_timeout": 5})
    assert run.drive().join() == [0, 1]


def test_one_event_reaches_every_run_waiting_on_its_type_and_correlation_id(
    runs: Runs, client: keepgoing.Client
) -> None:
    both = [runs.start(await_payment, {"order": "shared"}).drive() for _ in range(2)]
    for run in both:
        wait_until(lambda run=run: event_waits(client, run.workflow_id), what="both waits")
    client.publish_event("payment", "shared", "paid", event_id="evt-shared")
    assert [run.join()["event_id"] for run in both] == ["evt-shared", "evt-shared"]


@workflow(name="tev.catch")
async def catch() -> str:
    try:
        await wait_for_event("payment", "never", timeout=0.2)
    except TimeoutError as exc:
        return type(exc).__name__
    return "received"


def test_a_wait_that_times_out_raises_workflow_message_timeout_error(
    client: keepgoing.Client,
) -> None:
    began = time.perf_counter()
    assert client.run_workflow(catch) == "WorkflowMessageTimeoutError"
    assert time.perf_counter() - began < 10


def test_an_event_after_the_deadline_is_kept_for_a_later_wait(
    runs: Runs, client: keepgoing.Client
) -> None:
    run = runs.start(timeout_then_late, {"order": "o-late"}).drive()
    wait_until(
        lambda: of_type(client.history(run.workflow_id), ev.MessageWaitStarted, name="go"),
        what="the first wait to time out",
    )
    (ended,) = event_waits(client, run.workflow_id)
    client.publish_event("payment", "o-late", {"late": True}, event_id="evt-late")
    client.send_workflow_message(run.workflow_id, "go")
    # The ended wait is not advanced: no EventReceived is ever addressed to it.
    history = client.history(run.workflow_id)
    assert of_type(history, ev.EventReceived, cmd=ended.cmd) == []
    assert run.join(timeout=20) == {
        "first": "timeout",
        "is_timeout_error": True,
        "second": {"late": True},
    }
    history = client.history(run.workflow_id)
    assert of_type(history, ev.EventReceived, cmd=ended.cmd) == []
    assert [e.event_id for e in of_type(history, ev.EventReceived)] == ["evt-late"]


@workflow(name="tev.timeout_then_wait_again")
async def timeout_then_wait_again(order: str) -> list[Any]:
    with contextlib.suppress(WorkflowMessageTimeoutError):
        await wait_for_event("payment", order, timeout=0.2)
    again = await wait_for_event("payment", order, timeout=10)
    return [again.event_id, again.payload]


def test_an_event_after_the_deadline_goes_to_the_wait_that_is_open(
    runs: Runs, client: keepgoing.Client
) -> None:
    run = runs.start(timeout_then_wait_again, {"order": "o-next"}).drive()
    wait_until(lambda: len(event_waits(client, run.workflow_id)) == 2, what="the second wait")
    ended, current = event_waits(client, run.workflow_id)
    client.publish_event("payment", "o-next", "late", event_id="evt-next")
    assert run.join() == ["evt-next", "late"]
    history = client.history(run.workflow_id)
    assert of_type(history, ev.EventReceived, cmd=ended.cmd) == []
    assert len(of_type(history, ev.EventReceived, cmd=current.cmd)) == 1


def test_each_publish_is_audited_once(runs: Runs, client: keepgoing.Client) -> None:
    run = runs.start(await_payment, {"order": "o-a"}).drive()
    wait_until(lambda: event_waits(client, run.workflow_id), what="the event wait")
    client.publish_event("payment", "o-a", 1, event_id="evt-a")
    client.publish_event("payment", "o-a", 1, event_id="evt-a")  # a duplicate: no new entry
    run.join()
    (entry,) = client.list_audit(action="event.publish")
    assert entry.detail["event_id"] == "evt-a"
    assert entry.detail["matched_runs"] == [run.handle.run_id]
    assert entry.actor_kind == "user"


# -- bad input -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("payload", "too_large"),
    [
        pytest.param("x" * (256 * 1024), True, id="over-256KiB"),
        pytest.param({"a": {1, 2}}, False, id="set"),
        pytest.param([float("inf")], False, id="inf"),
        pytest.param({2: "int key"}, False, id="int-key"),
    ],
)
def test_a_bad_event_payload_is_refused_and_nothing_is_stored(
    runs: Runs, client: keepgoing.Client, db: Path, payload: Any, too_large: bool
) -> None:
    run = runs.start(await_payment, {"order": "o-bad", "timeout": 0.3}).drive()
    wait_until(lambda: event_waits(client, run.workflow_id), what="the event wait")
    with pytest.raises(PayloadError) as caught:
        client.publish_event("payment", "o-bad", payload, event_id="evt-bad")
    assert isinstance(caught.value, PayloadTooLargeError) is too_large
    with pytest.raises(keepgoing.WorkflowFailedError, match="WorkflowMessageTimeoutError"):
        run.join()
    assert of_type(client.history(run.workflow_id), ev.EventReceived) == []
    assert count_rows(db, "events") == 0
    assert client.list_audit(action="event.publish") == []
    # The refused id was not stored either: publishing it properly now works.
    assert client.publish_event("payment", "o-bad", "fine", event_id="evt-bad") == "evt-bad"
    assert count_rows(db, "events") == 1


def test_event_type_correlation_id_and_event_id_are_checked(client: keepgoing.Client) -> None:
    with pytest.raises(ValueError, match="event type"):
        client.publish_event("", "c")
    with pytest.raises(ValueError, match="correlation id"):
        client.publish_event("t", "")
    with pytest.raises(ValueError, match="event_id"):
        client.publish_event("t", "c", event_id="has space")


async def test_wait_for_event_outside_a_workflow_raises_runtime_error() -> None:
    with pytest.raises(RuntimeError, match="only inside a workflow"):
        await wait_for_event("payment", "o-1")


@workflow(name="tev.in_process")
async def in_process() -> str:
    try:
        await wait_for_event("payment", "o-1", timeout="3d")
    except WorkflowMessageTimeoutError:
        return "expired"
    return "paid"


def test_wait_for_event_in_process_times_out_under_the_fake_clock() -> None:
    with fake_clock():
        assert asyncio.run(in_process()) == "expired"
