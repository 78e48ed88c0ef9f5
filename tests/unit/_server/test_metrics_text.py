"""``/metrics`` text (keepgoing._server.metrics): every series, its labels and its value.

The store is a stand-in with fixed answers, so each sample's value is known; the
text is read back with ``prometheus_client``'s own parser, as a scraper reads it.
"""

from __future__ import annotations

import asyncio
import types
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from keepgoing._server import metrics
from keepgoing._store.limits_protocol import DeclaredLimit, LimitUse
from keepgoing._store.observe_protocol import STEP_BUCKETS


class _Store:
    async def run_counts(self) -> dict[str, int]:
        return {"completed": 3, "running": 1}

    async def queue_depths(self, now: float) -> list[Any]:
        return [
            types.SimpleNamespace(
                queue=name,
                depth=3,
                runnable_runs=1,
                ready_tasks=2,
                delayed_tasks=0,
                running_tasks=4,
            )
            for name in ("default", 'we"ird\\q\nx')
        ]

    async def list_workers(self) -> list[Any]:
        live = types.SimpleNamespace(worker_id="w1", lost_at=None, info={"hung_threads": 2})
        lost = types.SimpleNamespace(worker_id="w2", lost_at=1.0, info={})
        return [live, lost]

    async def step_metrics(self) -> Any:
        return types.SimpleNamespace(
            buckets=list(range(len(STEP_BUCKETS))),
            count=len(STEP_BUCKETS) + 2,
            total_seconds=1.25,
            lease_expiries=7,
        )

    async def limit_use(self, now: float) -> list[LimitUse]:
        lookup = DeclaredLimit("lookup_customer", concurrency_cap=2, keyed=True)
        crm = DeclaredLimit("crm", rate_tokens=20, rate_period=1.0, rate_burst=5)
        return [LimitUse(crm, waiting=3, tokens=2.5), LimitUse(lookup, held=4, waiting=1)]

    async def gateway_usage_by_model(self) -> list[Any]:
        row = types.SimpleNamespace(
            model="gpt", provider=None, calls=5, errors=1, input_tokens=10, output_tokens=20,
            cost=0.5, latency_sum=2.5,
        )  # fmt: skip
        return [row]


def _samples() -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    ctx = types.SimpleNamespace(
        store=_Store(),
        clock=types.SimpleNamespace(now=lambda: 0.0),
        orchestrator=types.SimpleNamespace(
            stats=types.SimpleNamespace(timers_fired=4, leases_reaped=2)
        ),
        counters=types.SimpleNamespace(requests={200: 9, 404: 1}),
    )
    text = asyncio.run(metrics.render(ctx))  # type: ignore[arg-type]
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_every_series_has_its_value() -> None:
    samples = _samples()

    def at(name: str, **labels: str) -> float:
        return samples[(name, frozenset(labels.items()))]

    assert at("keepgoing_runs", status="completed") == 3
    assert at("keepgoing_runs", status="failed") == 0
    assert at("keepgoing_queue_depth", queue="default") == 3
    assert at("keepgoing_queue_items", queue='we"ird\\q\nx', kind="running_tasks") == 4
    assert at("keepgoing_workers") == 1
    assert at("keepgoing_worker_hung_threads", worker="w1") == 2
    assert at("keepgoing_step_duration_seconds_bucket", le="0.01") == 1
    assert at("keepgoing_step_duration_seconds_bucket", le="+Inf") == len(STEP_BUCKETS) + 2
    assert at("keepgoing_step_duration_seconds_sum") == 1.25
    assert at("keepgoing_step_duration_seconds_count") == len(STEP_BUCKETS) + 2
    assert at("keepgoing_lease_expiries_total") == 7
    assert at("keepgoing_limit_slots_held", limit="lookup_customer") == 4
    assert at("keepgoing_limit_slots", limit="lookup_customer") == 2
    assert at("keepgoing_limit_tokens", limit="crm") == 2.5
    assert ("keepgoing_limit_slots", frozenset({("limit", "crm")})) not in samples
    by = {"model": "gpt", "provider": ""}
    assert at("keepgoing_gateway_calls_total", **by, outcome="ok") == 4
    assert at("keepgoing_gateway_calls_total", **by, outcome="error") == 1
    assert at("keepgoing_gateway_tokens_total", **by, direction="output") == 20
    assert at("keepgoing_gateway_cost_usd_total", **by) == 0.5
    assert at("keepgoing_gateway_latency_seconds_count", **by) == 5
    assert at("keepgoing_gateway_latency_seconds_sum", **by) == 2.5
    assert at("keepgoing_server_timers_fired_total") == 4
    assert at("keepgoing_server_leases_reaped_total") == 2
    assert at("keepgoing_server_http_requests_total", status="404") == 1


def test_the_text_names_each_family_once_with_its_type() -> None:
    ctx_text = asyncio.run(
        metrics.render(
            types.SimpleNamespace(  # type: ignore[arg-type]
                store=_Store(),
                clock=types.SimpleNamespace(now=lambda: 0.0),
                orchestrator=None,
                counters=types.SimpleNamespace(requests={}),
            )
        )
    )
    types_of = [line.split()[2:] for line in ctx_text.splitlines() if line.startswith("# TYPE")]
    names = [name for name, _ in types_of]
    assert len(names) == len(set(names))
    assert dict(types_of) == {
        "keepgoing_runs": "gauge",
        "keepgoing_queue_depth": "gauge",
        "keepgoing_queue_items": "gauge",
        "keepgoing_workers": "gauge",
        "keepgoing_worker_hung_threads": "gauge",
        "keepgoing_step_duration_seconds": "histogram",
        "keepgoing_lease_expiries_total": "counter",
        "keepgoing_limit_slots_held": "gauge",
        "keepgoing_limit_slots": "gauge",
        "keepgoing_limit_tokens": "gauge",
        "keepgoing_gateway_calls_total": "counter",
        "keepgoing_gateway_tokens_total": "counter",
        "keepgoing_gateway_cost_usd_total": "counter",
        "keepgoing_gateway_latency_seconds": "summary",
        "keepgoing_server_timers_fired_total": "counter",
        "keepgoing_server_leases_reaped_total": "counter",
        "keepgoing_server_http_requests_total": "counter",
    }
    (timers,) = [
        s.value
        for f in text_string_to_metric_families(ctx_text)
        for s in f.samples
        if s.name == "keepgoing_server_timers_fired_total"
    ]
    assert timers == 0  # no orchestrator in this process
