"""The usage ledger after retention on every store: deleted calls stay as per-day totals."""

from __future__ import annotations

import pytest

from keepgoing._store.gateway_protocol import UsageQuery
from keepgoing._store.protocol import Store
from keepgoing._store.retention_protocol import RetentionWindow

from ._builders import NOW
from .test_gateway_ledger import call
from .test_retention import DAY, _ended


def _query(**fields: object) -> UsageQuery:
    values: dict[str, object] = {"since": NOW - DAY, "until": NOW + DAY}
    values.update(fields)
    return UsageQuery(**values)  # type: ignore[arg-type]


async def _sweep(store: Store, run_id: str) -> None:
    window = RetentionWindow(now=NOW + 2 * DAY, older_than=DAY)
    swept = await store.delete_runs([run_id], window, actor="test")
    assert swept.runs == 1 and swept.rows["gateway_calls"] == 3


async def test_totals_still_add_up_after_the_calls_rows_go(store: Store) -> None:
    run_id = await _ended(store, "digest-1")
    await store.record_gateway_call(call("a", run_id=run_id, step=1, attempt=1, cost=0.5))
    await store.record_gateway_call(
        call("b", run_id=run_id, step=1, attempt=1, status="error", latency=3.0, created_at=NOW + 5)
    )
    await store.record_gateway_call(
        call("c", run_id=run_id, step=2, attempt=1, key_id="k2", created_at=NOW + 9)
    )
    await store.record_gateway_call(call("outside", cost=1.0, created_at=NOW + 1))
    before = (await store.gateway_usage(_query())).totals

    await _sweep(store, run_id)

    assert await store.list_gateway_calls(run_id=run_id) == []
    after = (await store.gateway_usage(_query())).totals
    assert (
        (after.calls, after.errors, after.refused) == (before.calls, before.errors, 0) == (4, 1, 0)
    )
    assert after.cost == pytest.approx(before.cost) == pytest.approx(2.0)
    assert (after.input_tokens, after.output_tokens) == (before.input_tokens, before.output_tokens)
    assert after.latency_max == pytest.approx(3.0)
    assert (after.first_at, after.last_at) == (NOW, NOW + 9)

    by_key = (await store.gateway_usage(_query(key_id="k2"))).totals
    assert by_key.calls == 1 and by_key.cost == pytest.approx(0.25)
    workflow = (await store.gateway_usage(_query(workflow="wf"))).totals
    assert workflow.calls == 3  # the aggregate keeps the run's workflow name
    # A range that cuts an aggregate's calls in two leaves it out (k1's two calls at
    # NOW and NOW + 5); k2's one call at NOW + 9 is inside; a filter by run reads the
    # ledger alone.
    cut = (await store.gateway_usage(_query(since=NOW + 3))).totals
    assert (cut.calls, cut.key_id) == (1, None) and cut.first_at == NOW + 9
    by_run = (await store.gateway_usage(_query(run_id=run_id))).totals
    assert by_run.calls == 0


async def test_a_second_sweep_adds_to_the_same_day(store: Store) -> None:
    for n in range(2):
        run_id = await _ended(store, f"digest-{n}")
        for i in range(3):
            await store.record_gateway_call(
                call(f"{n}-{i}", run_id=run_id, step=1, attempt=1, created_at=NOW + i)
            )
        await _sweep(store, run_id)
    totals = (await store.gateway_usage(_query())).totals
    assert totals.calls == 6 and totals.cost == pytest.approx(1.5)


async def _deleted_and_kept(store: Store) -> str:
    """Three calls of a run retention deleted (two on k1, one on k2), and one call
    of a kept run on k1: what the groups and the series add up."""
    gone = await _ended(store, "digest-1")
    await store.record_gateway_call(call("a", run_id=gone, step=1, attempt=1, cost=0.5))
    await store.record_gateway_call(call("b", run_id=gone, step=1, attempt=1, created_at=NOW + 5))
    await store.record_gateway_call(
        call("c", run_id=gone, step=2, attempt=1, key_id="k2", created_at=NOW + 9)
    )
    kept = await _ended(store, "digest-2")
    await store.record_gateway_call(call("d", run_id=kept, step=1, attempt=1, created_at=NOW + 1))
    await _sweep(store, gone)
    return kept


async def test_groups_include_the_calls_of_deleted_runs(store: Store) -> None:
    kept = await _deleted_and_kept(store)

    by_key = {r.key_id: r for r in (await store.gateway_usage(_query(group_by="key"))).rows}
    assert {k: r.calls for k, r in by_key.items()} == {"k1": 3, "k2": 1}
    assert by_key["k1"].cost == pytest.approx(1.0) and by_key["k1"].first_at == NOW
    by_model = (await store.gateway_usage(_query(group_by="model"))).rows
    assert [(r.model, r.calls) for r in by_model] == [("gpt-4o-mini", 4)]
    by_workflow = (await store.gateway_usage(_query(group_by="workflow"))).rows
    assert [(r.workflow, r.calls) for r in by_workflow] == [("wf", 4)]
    by_run = (await store.gateway_usage(_query(group_by="run"))).rows
    assert sorted((r.run_id or "", r.workflow, r.calls) for r in by_run) == [
        ("", "wf", 3),  # the deleted run's calls, under its workflow
        (kept, "wf", 1),
    ]
    report = await store.gateway_usage(_query(group_by="key"))
    assert sum(r.calls for r in report.rows) == report.totals.calls == 4


async def test_the_series_includes_the_calls_of_deleted_runs(store: Store) -> None:
    await _deleted_and_kept(store)

    report = await store.gateway_usage(_query(since=NOW, bucket=3600.0))
    ((point),) = report.points
    assert point.at == NOW and point.calls == 4 and point.cost == pytest.approx(1.25)
    assert sum(p.calls for p in report.points) == report.totals.calls
    by_run = await store.gateway_usage(_query(run_id="run-digest-2", bucket=3600.0))
    assert [p.calls for p in by_run.points] == [1]  # a filter by run: the ledger alone
