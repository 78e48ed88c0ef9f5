"""Messages: ``wait_for_message``, ``send_message``, ``local_messages`` and
``Client.send_workflow_message`` (in-process and durably on a SQLite file)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import keepgoing
from keepgoing import (
    PayloadError,
    RunNotFoundError,
    WorkflowMessageTimeoutError,
    WorkflowNotRunningError,
    local_messages,
    send_message,
    task,
    wait_for_message,
    workflow,
)
from keepgoing._history import events as ev
from keepgoing.errors import PayloadTooLargeError
from keepgoing.testing import DEFAULT_START, fake_clock

from .._messaging_support import Runs, count_rows, of_type, wait_until

pytestmark = pytest.mark.timeout(30)

# -- the docs' example ("Wait for messages") -----------------------------------------------

DECISIONS: list[tuple[str, bool, str]] = []


@task(name="tmsg.apply_decision")
def apply_decision(account_id: str, approved: bool, reviewer: str) -> None:
    DECISIONS.append((account_id, approved, reviewer))


@workflow(name="tmsg.review_account")
async def review_account(account_id: str) -> str:
    try:
        review = await wait_for_message("review", timeout=timedelta(days=2))
    except WorkflowMessageTimeoutError:
        return "expired"
    await apply_decision(account_id, review.payload["approved"], review.sender_id)
    return "approved" if review.payload["approved"] else "rejected"


@pytest.fixture(autouse=True)
def _clear_decisions() -> Iterator[None]:
    DECISIONS.clear()
    yield
    DECISIONS.clear()


def test_review_account_approved_with_local_messages() -> None:
    with local_messages([("review", {"approved": True, "comment": "Verified by phone"})]):
        result = asyncio.run(review_account("acct-1"))
    assert result == "approved"
    assert DECISIONS == [("acct-1", True, "local")]


def test_review_account_rejected_with_local_messages() -> None:
    with local_messages([("review", {"approved": False})]):
        result = asyncio.run(review_account("acct-2"))
    assert result == "rejected"
    assert DECISIONS == [("acct-2", False, "local")]


def test_review_account_expires_after_two_days_under_the_fake_clock() -> None:
    began = time.perf_counter()
    with fake_clock() as clock:
        result = asyncio.run(review_account("acct-3"))
    assert result == "expired"
    assert time.perf_counter() - began < 5  # two days, in milliseconds of wall time
    assert clock.now() == pytest.approx(DEFAULT_START + timedelta(days=2).total_seconds())
    assert DECISIONS == []


def test_local_messages_apply_only_inside_their_block() -> None:
    with local_messages([("review", {"approved": True})]):
        pass
    with fake_clock():
        assert asyncio.run(review_account("acct-4")) == "expired"


# -- in-process semantics ------------------------------------------------------------------


@workflow(name="tmsg.take")
async def take(names: list[str]) -> list[Any]:
    """Wait for one message per entry of ``names``, in that order; return their payloads."""
    return [(await wait_for_message(name)).payload for name in names]


@workflow(name="tmsg.describe")
async def describe(name: str = "m", timeout: float | None = None) -> dict[str, Any]:
    message = await wait_for_message(name, timeout=timeout)
    return {
        "name": message.name,
        "payload": message.payload,
        "sender_kind": message.sender_kind,
        "sender_id": message.sender_id,
        "sent_at": message.sent_at.timestamp(),
        "tz": message.sent_at.tzinfo is not None,
        "message_id": message.message_id,
    }


def test_a_local_message_carries_name_payload_sender_and_time() -> None:
    with fake_clock(), local_messages([("m", {"x": [1, 2]})]):
        got = asyncio.run(describe("m"))
    assert got["name"] == "m"
    assert got["payload"] == {"x": [1, 2]}
    assert (got["sender_kind"], got["sender_id"]) == ("local", "local")
    assert got["sent_at"] == DEFAULT_START and got["tz"]
    assert got["message_id"]


def test_local_messages_are_kept_per_name_and_arrive_in_order() -> None:
    queued = [("a", 1), ("b", "x"), ("a", 2), ("c", None), ("a", 3)]
    with local_messages(queued):
        # "b" is asked for first: the earlier "a" waits in the inbox meanwhile.
        assert asyncio.run(take(["b", "a", "a", "c", "a"])) == ["x", 1, 2, None, 3]


def test_a_hundred_local_messages_with_one_name_arrive_in_send_order() -> None:
    with local_messages([("item", i) for i in range(100)]):
        assert asyncio.run(take(["item"] * 100)) == list(range(100))


@workflow(name="tmsg.catch_timeout")
async def catch_timeout() -> str:
    try:
        await wait_for_message("never", timeout="5m")
    except TimeoutError as exc:  # WorkflowMessageTimeoutError is a TimeoutError
        return type(exc).__name__
    return "received"


def test_a_message_timeout_is_a_timeout_error() -> None:
    assert issubclass(WorkflowMessageTimeoutError, TimeoutError)
    with fake_clock() as clock:
        assert asyncio.run(catch_timeout()) == "WorkflowMessageTimeoutError"
    assert clock.now() == pytest.approx(DEFAULT_START + 300)


@workflow(name="tmsg.sender")
async def sender(target: str, payload: Any = None) -> str:
    return await send_message(target, "ping", payload)


def test_send_message_in_a_direct_in_process_call_raises_runtime_error() -> None:
    with pytest.raises(RuntimeError, match="direct in-process call"):
        asyncio.run(sender("someone"))


async def test_wait_for_message_outside_a_workflow_raises_runtime_error() -> None:
    with pytest.raises(RuntimeError, match="only inside a workflow"):
        await wait_for_message("review")


async def test_send_message_outside_a_workflow_raises_runtime_error() -> None:
    with pytest.raises(RuntimeError, match="only inside a workflow"):
        await send_message("wf-1", "review", {})


def test_local_messages_checks_its_items() -> None:
    with pytest.raises(ValueError, match="pair"), local_messages([("a", 1, 2)]):  # type: ignore[list-item]
        pass
    with pytest.raises(PayloadError), local_messages([("a", {1, 2})]):
        pass
    with pytest.raises(ValueError), local_messages([("", 1)]):
        pass


# -- durably, through a SQLite store ------------------------------------------------------


def waiting_for(client: keepgoing.Client, workflow_id: str, name: str, count: int = 1) -> bool:
    history = client.history(workflow_id)
    return len(of_type(history, ev.MessageWaitStarted, name=name)) >= count


def test_review_account_through_the_store_with_a_message_sent_while_it_waits(
    runs: Runs, client: keepgoing.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KEEPGOING_USER", "reviewer-7")
    run = runs.start(review_account, {"account_id": "acct-9"}).drive()
    wait_until(lambda: waiting_for(client, run.workflow_id, "review"), what="the wait")
    client.send_workflow_message(run.workflow_id, "review", {"approved": True})
    assert run.join() == "approved"
    assert DECISIONS == [("acct-9", True, "reviewer-7")]


def test_a_store_mode_send_is_stamped_user_with_keepgoing_user(
    runs: Runs, client: keepgoing.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KEEPGOING_USER", "alice@example.com")
    run = runs.start(describe, {"name": "m"}).drive()
    wait_until(lambda: waiting_for(client, run.workflow_id, "m"), what="the wait")
    before = time.time()
    message_id = client.send_workflow_message(run.workflow_id, "m", {"n": 1})
    got = run.join()
    assert got["sender_kind"] == "user"
    assert got["sender_id"] == "alice@example.com"
    assert got["message_id"] == message_id
    assert got["payload"] == {"n": 1}
    assert before - 1 <= got["sent_at"] <= time.time() + 1


def test_messages_sent_before_the_first_step_are_kept_in_order(
    runs: Runs, client: keepgoing.Client
) -> None:
    run = runs.start(take, {"names": ["b", "a", "a", "a"]})  # created, not yet driven
    for name, payload in [("a", 1), ("a", 2), ("b", "x"), ("a", 3)]:
        client.send_workflow_message(run.workflow_id, name, payload)
    assert run.drive().join() == ["x", 1, 2, 3]


def test_a_hundred_messages_arrive_in_send_order_before_and_during_the_waits(
    runs: Runs, client: keepgoing.Client
) -> None:
    run = runs.start(take, {"names": ["item"] * 100})
    for i in range(50):
        client.send_workflow_message(run.workflow_id, "item", i)
    run.drive()
    wait_until(lambda: waiting_for(client, run.workflow_id, "item", 51), what="the 51st wait")
    for i in range(50, 100):
        client.send_workflow_message(run.workflow_id, "item", i)
    assert run.join() == list(range(100))
    received = of_type(client.history(run.workflow_id), ev.MessageReceived)
    assert [m.payload for m in received] == list(range(100))


@workflow(name="tmsg.late_message")
async def late_message() -> dict[str, Any]:
    out: dict[str, Any] = {}
    try:
        await wait_for_message("m", timeout=0.2)
        out["first"] = "received"
    except WorkflowMessageTimeoutError:
        out["first"] = "timeout"
    await wait_for_message("go")
    out["second"] = (await wait_for_message("m", timeout=10)).payload
    return out


def test_a_message_after_a_timed_out_wait_goes_to_the_next_wait(
    runs: Runs, client: keepgoing.Client
) -> None:
    run = runs.start(late_message).drive()
    wait_until(lambda: waiting_for(client, run.workflow_id, "go"), what="the 'go' wait")
    client.send_workflow_message(run.workflow_id, "m", "late")
    client.send_workflow_message(run.workflow_id, "go")
    assert run.join() == {"first": "timeout", "second": "late"}


def test_each_client_send_is_audited(
    runs: Runs, client: keepgoing.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KEEPGOING_USER", "auditor")
    run = runs.start(take, {"names": ["a", "b", "a"]})
    ids = [
        client.send_workflow_message(run.workflow_id, name, i)
        for i, name in enumerate(["a", "b", "a"])
    ]
    assert run.drive().join() == [0, 1, 2]
    entries = client.list_audit(action="message.send", workflow_id=run.workflow_id)
    assert len(entries) == 3
    oldest_first = list(reversed(entries))
    assert [e.detail["message_id"] for e in oldest_first] == ids
    assert [e.detail["name"] for e in oldest_first] == ["a", "b", "a"]
    for entry in entries:
        assert (entry.actor_kind, entry.actor_id) == ("user", "auditor")
        assert (entry.workflow_id, entry.run_id) == (run.workflow_id, run.handle.run_id)


def test_a_workflow_send_is_stamped_workflow_with_the_senders_id(
    runs: Runs, client: keepgoing.Client
) -> None:
    target = runs.start(describe, {"name": "ping"}).drive()
    message_id = client.run_workflow(
        sender, {"target": target.workflow_id, "payload": [1]}, workflow_id="the-sender"
    )
    got = target.join()
    assert (got["sender_kind"], got["sender_id"]) == ("workflow", "the-sender")
    assert got["message_id"] == message_id
    assert got["payload"] == [1]
    (delivered,) = of_type(client.history("the-sender"), ev.MessageDelivered)
    assert (delivered.message_id, delivered.error) == (message_id, None)


@workflow(name="tmsg.send_checked")
async def send_checked(target: str, payload: Any = None) -> str:
    try:
        await send_message(target, "ping", payload)
    except WorkflowNotRunningError as exc:
        return f"not running: {exc}"
    except PayloadError:
        return "bad payload"
    return "sent"


def test_a_workflow_send_to_a_missing_or_ended_workflow_raises_inside_it(
    client: keepgoing.Client,
) -> None:
    missing = client.run_workflow(send_checked, {"target": "nobody-here"})
    assert missing.startswith("not running:") and "nobody-here" in missing
    client.run_workflow(noop, workflow_id="ended-one")
    ended = client.run_workflow(send_checked, {"target": "ended-one"})
    assert ended.startswith("not running:") and "ended-one" in ended


@workflow(name="tmsg.send_set")
async def send_set(target: str) -> str:
    try:
        await send_message(target, "ping", {"bad": {1, 2}})
    except PayloadError:
        return "bad payload"
    return "sent"


@workflow(name="tmsg.noop")
async def noop() -> None:
    return None


def test_a_workflow_send_with_a_non_json_payload_raises_inside_it(
    runs: Runs, client: keepgoing.Client
) -> None:
    target = runs.start(take, {"names": ["ping"]})
    assert client.run_workflow(send_set, {"target": target.workflow_id}) == "bad payload"
    assert of_type(client.history(target.workflow_id), ev.MessageReceived) == []


# -- bad input to Client.send_workflow_message --------------------------------------------

LIMIT = 256 * 1024


@pytest.mark.parametrize(
    "payload",
    [
        pytest.param("x" * LIMIT, id="string-over-256KiB"),
        pytest.param({"blob": ["y" * 1000] * 300}, id="nested-over-256KiB"),
    ],
)
def test_an_oversized_message_is_refused_and_nothing_is_stored(
    runs: Runs, client: keepgoing.Client, tmp_path: Path, payload: Any
) -> None:
    run = runs.start(take, {"names": ["m"]})
    before = client.history(run.workflow_id)
    with pytest.raises(PayloadError) as caught:
        client.send_workflow_message(run.workflow_id, "m", payload)
    assert isinstance(caught.value, PayloadTooLargeError)
    assert "256 KiB" in str(caught.value)
    assert client.history(run.workflow_id) == before
    assert client.list_audit(action="message.send") == []
    assert count_rows(tmp_path / "kg.db", "audit_log") == 0


def test_a_message_of_exactly_256_kib_is_accepted(runs: Runs, client: keepgoing.Client) -> None:
    run = runs.start(take, {"names": ["m"]})
    payload = "z" * (LIMIT - 2)  # two bytes of quotes make it exactly 256 KiB as JSON
    client.send_workflow_message(run.workflow_id, "m", payload)
    assert run.drive().join() == [payload]


def test_the_limit_counts_utf8_bytes_not_characters(runs: Runs, client: keepgoing.Client) -> None:
    run = runs.start(take, {"names": ["m"]})
    fits = "é" * ((LIMIT - 2) // 2)  # two bytes each: exactly 256 KiB with the quotes
    with pytest.raises(PayloadError) as caught:
        client.send_workflow_message(run.workflow_id, "m", fits + "é")
    assert isinstance(caught.value, PayloadTooLargeError)
    client.send_workflow_message(run.workflow_id, "m", fits)
    assert run.drive().join() == [fits]


@pytest.mark.parametrize(
    "payload",
    [
        pytest.param({1, 2}, id="set"),
        pytest.param({"when": datetime(2026, 1, 1, tzinfo=UTC)}, id="datetime"),
        pytest.param({1: "int key"}, id="int-key"),
        pytest.param([float("nan")], id="nan"),
        pytest.param(object(), id="object"),
    ],
)
def test_a_non_json_message_is_refused_and_nothing_is_stored(
    runs: Runs, client: keepgoing.Client, tmp_path: Path, payload: Any
) -> None:
    run = runs.start(take, {"names": ["m"]})
    before = client.history(run.workflow_id)
    with pytest.raises(PayloadError) as caught:
        client.send_workflow_message(run.workflow_id, "m", payload)
    assert not isinstance(caught.value, PayloadTooLargeError)
    assert client.history(run.workflow_id) == before
    assert count_rows(tmp_path / "kg.db", "audit_log") == 0


def test_a_send_to_an_unknown_workflow_raises_run_not_found(
    client: keepgoing.Client, tmp_path: Path
) -> None:
    with pytest.raises(RunNotFoundError, match="no-such-workflow"):
        client.send_workflow_message("no-such-workflow", "m", {})
    assert count_rows(tmp_path / "kg.db", "audit_log") == 0


def test_a_send_to_a_finished_workflow_raises_not_running_and_stores_nothing(
    runs: Runs, client: keepgoing.Client, tmp_path: Path
) -> None:
    run = runs.start(take, {"names": ["m"]})
    client.send_workflow_message(run.workflow_id, "m", 1)
    assert run.drive().join() == [1]
    before = client.history(run.workflow_id)
    with pytest.raises(WorkflowNotRunningError, match=run.workflow_id):
        client.send_workflow_message(run.workflow_id, "m", 2)
    assert client.history(run.workflow_id) == before
    assert len(client.list_audit(action="message.send")) == 1
    assert count_rows(tmp_path / "kg.db", "audit_log") == 1


def test_a_send_addressed_to_a_run_id_must_name_an_open_run_of_that_workflow(
    runs: Runs, client: keepgoing.Client
) -> None:
    first = runs.start(take, {"names": ["m"]}, workflow_id="by-run-id")
    client.send_workflow_message("by-run-id", "m", 1, run_id=first.handle.run_id)
    assert first.drive().join() == [1]
    second = runs.start(take, {"names": ["m"]}, workflow_id="by-run-id")  # the id is free again
    with pytest.raises(WorkflowNotRunningError):
        client.send_workflow_message("by-run-id", "m", 2, run_id=first.handle.run_id)
    with pytest.raises(RunNotFoundError):
        client.send_workflow_message("other-id", "m", 2, run_id=second.handle.run_id)
    client.send_workflow_message("by-run-id", "m", 3)  # the newest run
    assert second.drive().join() == [3]


def test_in_process_a_wait_nothing_can_end_is_reported_under_the_fake_clock() -> None:
    with fake_clock(), pytest.raises(RuntimeError, match="cannot happen"):
        asyncio.run(take(["never-sent"]))


def test_a_message_name_must_be_a_non_empty_string(runs: Runs, client: keepgoing.Client) -> None:
    run = runs.start(take, {"names": ["m"]})
    for bad in ("", "n" * 201, 7):
        with pytest.raises(ValueError, match="message name"):
            client.send_workflow_message(run.workflow_id, bad, {})  # type: ignore[arg-type]
    assert of_type(client.history(run.workflow_id), ev.MessageReceived) == []
