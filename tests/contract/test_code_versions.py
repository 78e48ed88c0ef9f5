"""Code versions of activations, and retrying blocked runs (every store)."""

from __future__ import annotations

from typing import Any

import pytest

from keepgoing._history import events as ev
from keepgoing._store._versions import RETRY_BLOCKED_FIRST, retry_blocked_after
from keepgoing._store.protocol import Store
from keepgoing._store.records import FastActivation, StartRequest
from keepgoing.errors import RunNotFoundError, WorkflowNotRunningError

from ._builders import NOW, QUEUE, TTL, WF, claim_one, claim_run, commit, start, success, task


async def _events(store: Store, run_id: str, kind: type[Any]) -> list[Any]:
    return [e for e in await store.read_history(run_id) if isinstance(e, kind)]


async def _claim_blocked(store: Store, version: str, now: float = NOW) -> list[str]:
    claims = await store.claim_blocked(
        worker_id="w2", queues=[QUEUE], versions={WF: version}, limit=10, lease_ttl=TTL, now=now
    )
    return [c.run.run_id for c in claims]


async def _block(store: Store, run_id: str, version: str, now: float = NOW) -> None:
    claim = await claim_run(store, run_id, now=now)
    done = await commit(
        store, claim, [], now=now, blocked_reason=f"diff of {version}", code_version=version
    )
    assert done.ok


async def test_every_activation_records_its_code_version(store: Store) -> None:
    run = await start(store)
    claim = await claim_run(store, run.run_id)
    assert (await commit(store, claim, [task()], code_version="aaa")).ok
    history = await store.read_history(run.run_id)
    (marker,) = [e for e in history if isinstance(e, ev.ActivationCompleted)]
    assert marker.code_version == "aaa"
    stored = await store.get_run(run.run_id)
    assert stored is not None and stored.code_version == "v1"  # the start knew its version
    assert stored.code_versions == ("aaa",)


async def test_a_run_started_by_name_learns_its_version_from_the_first_activation(
    store: Store,
) -> None:
    request = StartRequest("run-n", "wf-n", WF, {"x": 1}, QUEUE, "", NOW)
    await store.start_run(request)
    claim = await claim_run(store, "run-n")
    assert (await commit(store, claim, [task()], code_version="bbb")).ok
    run = await store.get_run("run-n")
    assert run is not None and (run.code_version, run.code_versions) == ("bbb", ("bbb",))
    started = (await store.read_history("run-n"))[0]
    assert isinstance(started, ev.WorkflowStarted) and started.code_version == "bbb"
    assert started.input == {"x": 1} and started.seq == 1 and started.at == NOW


async def test_later_activations_add_only_versions_not_seen_before(store: Store) -> None:
    run = await start(store)
    # Each activation schedules a task whose completion makes the run runnable again.
    for cmd, version in enumerate(("aaa", "aaa", "bbb", "aaa"), start=1):
        now = NOW + 2 * cmd
        claim = await claim_run(store, run.run_id, now=now)
        assert (await commit(store, claim, [task(cmd)], now=now, code_version=version)).ok
        attempt = await claim_one(store, now=now)
        assert (await store.complete_task(success(attempt, now=now + 1), None)).accepted
    stored = await store.get_run(run.run_id)
    assert stored is not None and stored.code_version == "v1"
    assert stored.code_versions == ("aaa", "bbb")


async def test_a_first_activation_that_blocks_records_its_version(store: Store) -> None:
    run = await start(store)
    await _block(store, run.run_id, "aaa")
    blocked = await store.get_run(run.run_id)
    assert blocked is not None and blocked.status == "blocked"
    assert (blocked.code_version, blocked.code_versions) == ("v1", ("aaa",))
    assert blocked.blocked_versions == ("aaa",) and blocked.runnable is False
    # A run started by name learns its version from a blocking first activation too.
    await store.start_run(StartRequest("run-b", "wf-b", WF, {}, QUEUE, "", NOW))
    await _block(store, "run-b", "bbb")
    by_name = await store.get_run("run-b")
    assert by_name is not None and by_name.status == "blocked"
    assert (by_name.code_version, by_name.code_versions) == ("bbb", ("bbb",))
    started = (await store.read_history("run-b"))[0]
    assert isinstance(started, ev.WorkflowStarted) and started.code_version == "bbb"


async def test_a_blocked_run_is_retried_by_other_code_once_and_then_after_a_backoff(
    store: Store,
) -> None:
    run = await start(store)
    await _block(store, run.run_id, "aaa")
    blocked = await store.get_run(run.run_id)
    assert blocked is not None and blocked.status == "blocked"
    assert blocked.blocked_versions == ("aaa",)
    assert blocked.retry_blocked_at == NOW + RETRY_BLOCKED_FIRST
    (event,) = [
        e for e in await store.read_history(run.run_id) if isinstance(e, ev.WorkflowBlocked)
    ]
    assert (event.code_version, event.reason) == ("aaa", "diff of aaa")

    assert await _claim_blocked(store, "aaa") == []  # the code that blocked it: not yet
    assert await _claim_blocked(store, "bbb") == [run.run_id]  # new code: at once
    retried = await store.get_run(run.run_id)
    assert retried is not None and (retried.status, retried.blocked_reason) == ("running", None)
    assert retried.fence == blocked.fence + 1
    # The retrying worker holds the activation lease: nobody else takes the run meanwhile.
    assert (
        await store.claim_activations(
            worker_id="w3", queues=[QUEUE], workflow_names=[WF], limit=5, lease_ttl=TTL, now=NOW
        )
        == []
    )
    claims = await store.claim_activations(
        worker_id="w3",
        queues=[QUEUE],
        workflow_names=[WF],
        limit=5,
        lease_ttl=TTL,
        now=NOW + TTL + 1,
    )
    assert [c.run.run_id for c in claims] == [run.run_id]  # its lease lapsed: runnable
    done = await commit(
        store,
        claims[0],
        [],
        now=NOW + TTL + 1,
        worker="w3",
        blocked_reason="diff of bbb",
        code_version="bbb",
    )
    assert done.ok
    again = NOW + TTL + 1
    assert await _claim_blocked(store, "aaa", again) == []  # both versions tried: no ping-pong
    assert await _claim_blocked(store, "bbb", again) == []
    later = again + retry_blocked_after(2)
    assert await _claim_blocked(store, "aaa", later - 1) == []
    assert await _claim_blocked(store, "aaa", later) == [run.run_id]  # the periodic retry
    final = await store.get_run(run.run_id)
    assert final is not None and final.blocked_versions == ("aaa", "bbb")


async def test_only_blocked_runs_of_served_workflows_and_queues_are_retried(store: Store) -> None:
    run = await start(store)
    await _block(store, run.run_id, "aaa")
    other = await start(store, "wf-2", name="other")
    assert other.status == "running"
    assert (
        await store.claim_blocked(
            worker_id="w2",
            queues=["elsewhere"],
            versions={WF: "b"},
            limit=5,
            lease_ttl=TTL,
            now=NOW,
        )
        == []
    )
    assert (
        await store.claim_blocked(
            worker_id="w2", queues=[QUEUE], versions={"other": "b"}, limit=5, lease_ttl=TTL, now=NOW
        )
        == []
    )
    assert await _claim_blocked(store, "bbb") == [run.run_id]


async def test_unblock_makes_a_blocked_run_runnable_for_any_worker(store: Store) -> None:
    run = await start(store)
    await _block(store, run.run_id, "aaa")
    unblocked = await store.unblock_run(run.workflow_id, None, NOW + 1)
    assert (unblocked.status, unblocked.runnable, unblocked.blocked_reason) == (
        "running",
        True,
        None,
    )
    claim = await claim_run(store, run.run_id, now=NOW + 1)  # even code that blocked it
    assert claim.run.run_id == run.run_id
    with pytest.raises(WorkflowNotRunningError, match="not blocked"):
        await store.unblock_run(run.workflow_id, None, NOW + 2)
    with pytest.raises(RunNotFoundError):
        await store.unblock_run("no-such-id", None, NOW)
    with pytest.raises(RunNotFoundError):
        await store.unblock_run(run.workflow_id, "no-such-run", NOW)


async def test_a_fast_activation_records_its_code_version(store: Store) -> None:

    run = await start(store)
    claim = await claim_run(store, run.run_id)
    await commit(store, claim, [task()], code_version="aaa")
    attempt = await claim_one(store)
    current = await store.get_run(run.run_id)
    assert current is not None
    fast = FastActivation(
        run_fence=current.fence,
        last_input_seq=current.last_input_seq,
        commands=[ev.WorkflowCompleted(result=1)],
        time=NOW,
        code_version="aaa",
    )
    result = await store.complete_task(success(attempt), fast)
    assert result.activation is not None and result.activation.ok
    markers = [
        e for e in await store.read_history(run.run_id) if isinstance(e, ev.ActivationCompleted)
    ]
    assert [m.code_version for m in markers] == ["aaa", "aaa"]
