"""The usage reports on every store: the ledger grouped by workflow, run, step, attempt,
model and key over a time range, the totals, and the series over time."""

from __future__ import annotations

import pytest

from keepgoing._store.gateway_protocol import UsageQuery
from keepgoing._store.protocol import Store

from ._builders import NOW, start
from .test_gateway_ledger import call


async def _ledger(store: Store) -> tuple[str, str]:
    """Two runs of two workflows; a retried step; a call outside any run; a refused one."""
    digest = await start(store, "digest-1", name="support_digest")
    other = await start(store, "score-1", name="score_batch")
    rows = [
        # digest step 3: attempt 1 lost with its worker, attempt 2 committed
        call("d3a1", run_id=digest.run_id, step=3, attempt=1, attempt_state="lost", cost=0.5),
        call(
            "d3a2",
            run_id=digest.run_id,
            step=3,
            attempt=2,
            attempt_state="committed",
            cost=0.25,
            latency=2.0,
            created_at=NOW + 70,
        ),
        call("d4", run_id=digest.run_id, step=4, attempt=1, attempt_state="committed", cost=0.1),
        call(
            "s1",
            run_id=other.run_id,
            step=1,
            attempt=1,
            attempt_state="failed",
            status="error",
            input_tokens=0,
            output_tokens=0,
            cost=0,
            key_id="k2",
            model_answered=None,
            model_asked="slow",
            created_at=NOW + 130,
        ),
        call("outside", cost=1.0, model_answered="claude", created_at=NOW + 10),
        call("refused", status="refused", cost=0, input_tokens=0, output_tokens=0),
        call("too-old", run_id=digest.run_id, step=3, attempt=1, created_at=NOW - 3600),
    ]
    for row in rows:
        await store.record_gateway_call(row)
    return digest.run_id, other.run_id


def _query(**fields: object) -> UsageQuery:
    values: dict[str, object] = {"since": NOW, "until": NOW + 3600}
    values.update(fields)
    return UsageQuery(**values)  # type: ignore[arg-type]


async def test_totals_cover_the_range_and_count_errors_and_refusals(store: Store) -> None:
    await _ledger(store)
    report = await store.gateway_usage(_query())
    totals = report.totals
    assert totals.calls == 6  # the call from an hour earlier is outside the range
    assert (totals.errors, totals.refused) == (1, 1)
    assert totals.cost == pytest.approx(1.85)
    assert totals.input_tokens == 400 and totals.output_tokens == 80
    assert totals.latency_max == pytest.approx(2.0)
    assert totals.first_at == NOW and totals.last_at == NOW + 130
    assert (totals.workflow, totals.run_id, totals.model) == (None, None, None)


async def test_by_workflow_joins_the_runs_and_keeps_calls_outside_a_run(store: Store) -> None:
    await _ledger(store)
    rows = (await store.gateway_usage(_query(group_by="workflow"))).rows
    by = {r.workflow: r for r in rows}
    assert set(by) == {"support_digest", "score_batch", None}
    assert by["support_digest"].calls == 3
    assert by["support_digest"].cost == pytest.approx(0.85)
    assert by[None].calls == 2  # the call outside any run, and the refused one
    assert [r.cost for r in rows] == sorted((r.cost for r in rows), reverse=True)


async def test_by_attempt_shows_what_each_attempt_of_a_retried_step_cost(store: Store) -> None:
    digest, _ = await _ledger(store)
    report = await store.gateway_usage(_query(group_by="attempt", run_id=digest))
    got = {(r.step, r.attempt): (r.calls, r.cost, r.attempt_state) for r in report.rows}
    assert got == {
        (3, 1): (1, pytest.approx(0.5), "lost"),
        (3, 2): (1, pytest.approx(0.25), "committed"),
        (4, 1): (1, pytest.approx(0.1), "committed"),
    }
    assert {r.workflow for r in report.rows} == {"support_digest"}
    steps = await store.gateway_usage(_query(group_by="step", run_id=digest, step=3))
    [step] = steps.rows
    assert (step.step, step.attempt, step.calls) == (3, None, 2)
    assert step.cost == pytest.approx(0.75) and step.tokens == 240


async def test_by_model_and_by_key_with_filters(store: Store) -> None:
    _, other = await _ledger(store)
    models = {r.model: r.calls for r in (await store.gateway_usage(_query(group_by="model"))).rows}
    assert models == {"gpt-4o-mini": 4, "claude": 1, "slow": 1}
    keys = {r.key_id: r.calls for r in (await store.gateway_usage(_query(group_by="key"))).rows}
    assert keys == {"k1": 5, "k2": 1}
    only = await store.gateway_usage(_query(group_by="run", key_id="k2"))
    assert [(r.run_id, r.workflow, r.errors) for r in only.rows] == [(other, "score_batch", 1)]
    by_model = await store.gateway_usage(_query(group_by="run", model="claude"))
    assert [(r.run_id, r.calls) for r in by_model.rows] == [(None, 1)]
    named = await store.gateway_usage(_query(group_by="model", workflow="score_batch"))
    assert [(r.model, r.calls) for r in named.rows] == [("slow", 1)]
    assert (await store.gateway_usage(_query(group_by="key", limit=1))).rows[0].key_id == "k1"


async def test_the_series_puts_each_call_in_its_bucket(store: Store) -> None:
    await _ledger(store)
    report = await store.gateway_usage(_query(bucket=60.0))
    points = [(p.at, p.calls) for p in report.points]
    assert points == [(NOW, 4), (NOW + 60, 1), (NOW + 120, 1)]
    assert report.bucket == 60.0
    assert sum(p.cost for p in report.points) == pytest.approx(report.totals.cost)
    assert (await store.gateway_usage(_query())).points == []  # no bucket, no series


async def test_an_empty_range_has_zero_totals(store: Store) -> None:
    await _ledger(store)
    report = await store.gateway_usage(_query(since=NOW + 7200, until=NOW + 7300, bucket=10.0))
    assert report.rows == [] and report.points == []
    assert (report.totals.calls, report.totals.cost, report.totals.first_at) == (0, 0.0, None)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"group_by": "colour"}, "group_by must be one of"),
        ({"since": NOW + 10, "until": NOW}, "is after until"),
        ({"bucket": 0.0}, "bucket must be at least"),
        ({"bucket": 0.01}, "more than 10000 points"),
        ({"limit": 0}, "limit must be in"),
        ({"since": float("nan")}, "since must be a finite"),
    ],
)
async def test_a_bad_query_is_refused_by_name(
    store: Store, fields: dict[str, object], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        await store.gateway_usage(_query(**fields))
