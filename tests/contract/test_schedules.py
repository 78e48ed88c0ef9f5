"""Schedules on every store: one run per slot, overlap policies, catch-up, pause, backfill."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

from keepgoing._history.events import WorkflowCompleted
from keepgoing._schedule_spec import slot_iso
from keepgoing._schedules import commands as ops
from keepgoing._schedules.commands import Actor, ScheduleRequest
from keepgoing._schedules.service import fire_due
from keepgoing._store.protocol import Store
from keepgoing._store.schedules_protocol import FireSlot
from keepgoing._worker.retention import RetentionPolicy, RetentionSweep
from keepgoing.errors import InvalidScheduleError, ScheduleExistsError, ScheduleNotFoundError
from keepgoing.testing import FakeClock

from ._builders import claim_run, claim_runs, commit

ME = Actor("user", "tester")
T0 = 1_767_225_600.0  # 2026-01-01T00:00:00Z
MIN = 60.0


async def served(store: Store) -> None:
    await store.record_workflows(["wf"], ["default"], T0 - 100)


async def every_minute(store: Store, sid: str = "s", **options: object) -> ops.ScheduleInfo:
    await served(store)
    req = ScheduleRequest(workflow="wf", every="1m", **options)  # type: ignore[arg-type]
    return await ops.create(store, sid, req, actor=ME, now=T0 - 1)


async def finish(store: Store, run_id: str, now: float) -> None:
    claim = await claim_run(store, run_id, now=now)
    await commit(store, claim, [WorkflowCompleted(result=None)], now=now)


async def started(store: Store, sid: str = "s") -> list[str]:
    actions = await store.schedule_actions(sid, limit=1000)
    return [a.workflow_id for a in reversed(actions) if a.status == "started"]


async def test_each_slot_starts_one_run_with_its_id(store: Store) -> None:
    info = await every_minute(store, overlap="allow_all")
    assert info.next_fire_times[:2] == [T0, T0 + MIN]
    assert await fire_due(store, T0) == 1
    assert await fire_due(store, T0) == 0  # the same slot again: nothing
    run = await store.find_run("s-2026-01-01T00:00:00Z")
    assert run is not None and run.workflow_name == "wf"
    of = await store.schedule_of_run(run.run_id)
    assert of is not None and (of.schedule_id, of.slot_at) == ("s", T0)


async def test_skip_records_the_open_run(store: Store) -> None:
    await every_minute(store)
    await fire_due(store, T0)
    await fire_due(store, T0 + MIN)
    actions = await store.schedule_actions("s", limit=10)
    assert [a.status for a in actions] == ["skipped", "started"]
    assert actions[0].reason is not None and "s-2026-01-01T00:00:00Z" in actions[0].reason


async def test_allow_all_starts_every_slot(store: Store) -> None:
    await every_minute(store, overlap="allow_all")
    for k in range(3):
        await fire_due(store, T0 + k * MIN)
    assert len(await started(store)) == 3


async def test_buffer_one_keeps_one_and_starts_it_when_the_run_ends(store: Store) -> None:
    await every_minute(store, overlap="buffer_one")
    for k in range(3):
        await fire_due(store, T0 + k * MIN)
    statuses = [a.status for a in reversed(await store.schedule_actions("s", limit=10))]
    assert statuses == ["started", "buffered", "skipped"]
    first = await store.find_run("s-2026-01-01T00:00:00Z")
    assert first is not None
    await finish(store, first.run_id, T0 + 2 * MIN + 1)
    assert await fire_due(store, T0 + 2 * MIN + 2) == 1
    assert (await started(store))[-1] == f"s-{slot_iso(T0 + MIN)}"


async def test_buffer_all_starts_them_one_at_a_time(store: Store) -> None:
    await every_minute(store, overlap="buffer_all")
    for k in range(3):
        await fire_due(store, T0 + k * MIN)
    now = T0 + 3 * MIN - 1
    for k in range(3):
        run = await store.find_run(f"s-{slot_iso(T0 + k * MIN)}")
        assert run is not None, k
        await finish(store, run.run_id, now)
        await fire_due(store, now)
        assert len(await started(store)) == min(k + 2, 3)


async def test_cancel_other_cancels_the_open_run_and_starts_after_it(store: Store) -> None:
    await every_minute(store, overlap="cancel_other")
    await fire_due(store, T0)
    await fire_due(store, T0 + MIN)
    first = await store.find_run(f"s-{slot_iso(T0)}")
    assert first is not None
    history = await store.read_history(first.run_id)
    assert type(history[-1]).__name__ == "CancelRequested"
    await finish(store, first.run_id, T0 + MIN + 1)
    assert await fire_due(store, T0 + MIN + 2) == 1


async def test_catch_up_within_the_window_starts_the_missed_slots(store: Store) -> None:
    await every_minute(store, overlap="allow_all", catchup_window="1h")
    await fire_due(store, T0 + 3 * MIN)  # down for three slots, then back
    assert len(await started(store)) == 4


async def test_missed_slots_beyond_the_window_are_recorded_skipped(store: Store) -> None:
    await every_minute(store, overlap="allow_all", catchup_window="90s")
    await fire_due(store, T0 + 3 * MIN)
    actions = list(reversed(await store.schedule_actions("s", limit=10)))
    assert [a.status for a in actions] == ["skipped", "skipped", "started", "started"]
    assert all("catch-up window" in (a.reason or "") for a in actions[:2])


async def test_far_behind_is_one_summary_action(store: Store) -> None:
    await every_minute(store, overlap="allow_all", catchup_window="1m")
    for _ in range(3):  # a pass acts on a batch; the scheduler goes on while it is due
        await fire_due(store, T0 + 1000 * MIN)
    actions = await store.schedule_actions("s", limit=1000)
    assert len(actions) < 110
    assert sum(a.status == "started" for a in actions) == 2


async def test_pause_stops_and_unpause_resumes_without_a_burst(store: Store) -> None:
    await every_minute(store, overlap="allow_all")
    await fire_due(store, T0)
    await ops.pause(store, "s", note="maintenance", actor=ME, now=T0 + 1)
    for k in range(1, 5):
        assert await fire_due(store, T0 + k * MIN) == 0
    info = await ops.unpause(store, "s", actor=ME, now=T0 + 5 * MIN - 1)
    assert info.next_fire_times[0] == T0 + 5 * MIN
    assert await fire_due(store, T0 + 5 * MIN) == 1
    assert len(await started(store)) == 2


async def test_backfill_starts_one_run_per_slot(store: Store) -> None:
    await every_minute(store)
    actions = await ops.backfill(
        store, "s", T0 - 10 * MIN, T0 - 6 * MIN, overlap=None, actor=ME, now=T0
    )
    assert [a.status for a in actions] == ["started"] * 5
    again = await ops.backfill(
        store, "s", T0 - 10 * MIN, T0 - 6 * MIN, overlap=None, actor=ME, now=T0
    )
    assert again == []


async def test_trigger_starts_now(store: Store) -> None:
    await every_minute(store)
    action = await ops.trigger(store, "s", actor=ME, now=T0 + 12.5)
    assert action.status == "started" and action.workflow_id == "s-2026-01-01T00:00:12.500Z"
    audit = await store.list_audit(action="schedule.trigger")
    assert audit[0].actor_id == "tester"


async def test_two_schedulers_start_exactly_one_run_per_slot(store: Store) -> None:
    await every_minute(store, overlap="allow_all")
    for k in range(20):
        now = T0 + k * MIN
        await asyncio.gather(fire_due(store, now), fire_due(store, now))
    assert len(await started(store)) == 20
    runs = await store.list_runs(limit=100)
    assert len(runs) == 20


async def test_a_dst_week_in_paris(store: Store) -> None:
    await served(store)
    begin = datetime(2026, 3, 26, tzinfo=UTC).timestamp()
    req = ScheduleRequest(workflow="wf", cron="30 2 * * *", timezone="Europe/Paris")
    await ops.create(store, "paris", req, actor=ME, now=begin)
    for hour in range(7 * 24):
        await fire_due(store, begin + hour * 3600)
    got = [
        a.workflow_id.removeprefix("paris-")
        for a in reversed(await store.schedule_actions("paris", limit=10))
    ]
    assert got == [
        "2026-03-26T01:30:00Z",
        "2026-03-27T01:30:00Z",
        "2026-03-28T01:30:00Z",
        "2026-03-29T01:30:00Z",  # 02:30 does not exist: 03:30 summer time
        "2026-03-30T00:30:00Z",
        "2026-03-31T00:30:00Z",
        "2026-04-01T00:30:00Z",
    ]


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"cron": "61 * * * *"}, "not a valid cron"),
        ({"cron": "* * * *"}, "has 4 fields"),
        ({"cron": "* * * * *", "timezone": "Europe/Pariss"}, "unknown time zone"),
        ({"every": "0s"}, "shorter than one second"),
        ({"every": "1m", "overlap": "sometimes"}, "unknown overlap"),
        ({"every": "soon"}, "not a duration"),
        ({}, "exactly one of cron= and every="),
    ],
)
async def test_bad_specs_are_refused_at_create(
    store: Store, options: dict[str, object], words: str
) -> None:
    await served(store)
    with pytest.raises(InvalidScheduleError, match=words):
        await ops.create(store, "bad", ScheduleRequest(workflow="wf", **options), actor=ME, now=T0)  # type: ignore[arg-type]
    assert await store.get_schedule("bad") is None


async def test_a_workflow_nothing_serves_is_refused(store: Store) -> None:
    await served(store)
    with pytest.raises(InvalidScheduleError, match="did you mean 'wf'"):
        await ops.create(store, "s", ScheduleRequest(workflow="wff", every="1m"), actor=ME, now=T0)


async def test_ids_are_unique_and_deleted_schedules_are_gone(store: Store) -> None:
    await every_minute(store)
    with pytest.raises(ScheduleExistsError):
        await every_minute(store)
    await ops.delete(store, "s", actor=ME, now=T0)
    with pytest.raises(ScheduleNotFoundError):
        await ops.describe(store, "s", T0)


async def _fourteen_actions(store: Store) -> list[str]:
    """Fourteen started slots, all ended but the oldest; two older skipped ones."""
    await every_minute(store, overlap="allow_all")
    slots = [FireSlot(T0 - MIN * k, missed="late") for k in (2, 1)]
    slots += [FireSlot(T0 + MIN * i) for i in range(14)]
    out = await store.fire_schedule(
        "s", slots, expect_slot=None, next_slot=None, next_due=None, now=T0, move=False
    )
    assert out.claimed and len(out.actions) == 16
    ending = {a.run_id for a in out.actions[3:]}
    while claims := await claim_runs(store, worker="w1", now=T0 + 1):
        for claim in claims:
            if claim.run.run_id in ending:
                await commit(store, claim, [WorkflowCompleted(result=None)], now=T0 + 1)
        if not ending & {c.run.run_id for c in claims}:
            break
    return [a.workflow_id for a in out.actions]


async def test_retention_deletes_old_actions_but_the_newest_ten_and_open_runs(
    store: Store,
) -> None:
    wids = await _fourteen_actions(store)
    clock = FakeClock(T0 + 2 * 86400)
    sweep = RetentionSweep(store, RetentionPolicy(runs=86400.0), clock=clock, owner="s1")

    await sweep.tick()

    kept = [a.workflow_id for a in reversed(await store.schedule_actions("s", limit=1000))]
    assert kept == [wids[2], *wids[6:]]  # the open run's, and the newest ten
    sweeps = await store.list_audit(action="retention.sweep", limit=50)
    counts = [e.detail["rows"].get("schedule_actions", 0) for e in sweeps]
    assert sum(counts) == 5  # two skipped slots and three ended runs' slots


async def test_retention_off_keeps_every_action(store: Store) -> None:
    await _fourteen_actions(store)
    clock = FakeClock(T0 + 1000 * 86400)

    await RetentionSweep(store, RetentionPolicy(), clock=clock, owner="s1").tick()

    assert len(await store.schedule_actions("s", limit=1000)) == 16


async def test_a_pass_that_deletes_runs_and_actions_writes_one_audit_entry(store: Store) -> None:
    await _fourteen_actions(store)
    clock = FakeClock(T0 + 2 * 86400)
    sweep = RetentionSweep(store, RetentionPolicy(runs=86400.0), clock=clock, owner="s1")

    await sweep.tick()

    sweeps = await store.list_audit(action="retention.sweep", limit=50)
    assert len(sweeps) == 1, [e.detail for e in sweeps]
    assert sweeps[0].detail["rows"].get("schedule_actions") == 5
    assert sweeps[0].detail["runs"] > 0  # and the ended runs, in the same entry
