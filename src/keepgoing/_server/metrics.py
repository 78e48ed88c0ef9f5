"""``/metrics`` in the Prometheus text format (version 0.0.4), by ``prometheus_client``.

Store-wide views (runs by status, queue depth, workers, step latency, lease
expiries, flow control's limits, the gateway's ledger) are the same whichever server is scraped; the
``keepgoing_server_*`` series are this process's own (its orchestrator and its
HTTP requests). Each scrape reads the store once and hands every family, the
gateway's too, to one registry that ``generate_latest`` writes out.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
)
from prometheus_client.metrics_core import Metric

from keepgoing._gateway.metrics import gateway_families
from keepgoing._server.context import ServerContext
from keepgoing._store.limits_protocol import LimitUse
from keepgoing._store.observe_protocol import STEP_BUCKETS

__all__ = ["CONTENT_TYPE", "render"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
STATUSES = ("queued", "running", "blocked", "completed", "failed", "cancelled", "continued")
_QUEUE_KINDS = ("runnable_runs", "ready_tasks", "delayed_tasks", "running_tasks")


class _Scrape:
    """One scrape's families, read from the store before the registry collects them."""

    def __init__(self, families: list[Metric]) -> None:
        self.families = families

    def collect(self) -> Iterator[Metric]:
        return iter(self.families)


async def render(ctx: ServerContext) -> str:
    families = await _store_families(ctx)
    families += _limit_families(await ctx.store.limit_use(ctx.clock.now()))
    families += gateway_families(await ctx.store.gateway_usage_by_model())
    families += _server_families(ctx)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Scrape(families))
    return generate_latest(registry).decode()


async def _store_families(ctx: ServerContext) -> list[Metric]:
    store = ctx.store
    counts = await store.run_counts()
    depths = await store.queue_depths(ctx.clock.now())
    workers = [w for w in await store.list_workers() if w.lost_at is None]
    steps = await store.step_metrics()
    runs = GaugeMetricFamily("keepgoing_runs", "Runs by status.", labels=["status"])
    for status in STATUSES:
        runs.add_metric([status], counts.get(status, 0))
    depth = GaugeMetricFamily(
        "keepgoing_queue_depth",
        "Work waiting on each queue: runnable runs plus ready tasks.",
        labels=["queue"],
    )
    items = GaugeMetricFamily(
        "keepgoing_queue_items",
        "Queue contents by kind (runnable_runs, ready_tasks, delayed_tasks, running_tasks).",
        labels=["queue", "kind"],
    )
    for q in depths:
        depth.add_metric([q.queue], q.depth)
        for kind in _QUEUE_KINDS:
            items.add_metric([q.queue, kind], getattr(q, kind))
    live = GaugeMetricFamily("keepgoing_workers", "Live registered workers.", value=len(workers))
    hung = GaugeMetricFamily(
        "keepgoing_worker_hung_threads",
        "Threads still running a sync task body whose attempt timed out, per worker.",
        labels=["worker"],
    )
    for w in workers:
        hung.add_metric([w.worker_id], int(w.info.get("hung_threads", 0) or 0))
    buckets = [(f"{le:g}", n) for le, n in zip(STEP_BUCKETS, steps.buckets, strict=True)]
    duration = HistogramMetricFamily(
        "keepgoing_step_duration_seconds",
        "How long completed steps took (the successful attempt).",
        buckets=[*buckets, ("+Inf", steps.count)],
        sum_value=steps.total_seconds,
    )
    expiries = CounterMetricFamily(
        "keepgoing_lease_expiries_total",
        "Task attempts recovered because their worker stopped renewing its lease.",
        value=steps.lease_expiries,
    )
    return [runs, depth, items, live, hung, duration, expiries]


def _limit_families(use: list[LimitUse]) -> list[Metric]:
    held = GaugeMetricFamily(
        "keepgoing_limit_slots_held",
        "Concurrency slots held now (attempts running with an unexpired lease), per limit.",
        labels=["limit"],
    )
    slots = GaugeMetricFamily(
        "keepgoing_limit_slots",
        "A concurrency limit's slots (per key, for a keyed limit).",
        labels=["limit"],
    )
    tokens = GaugeMetricFamily(
        "keepgoing_limit_tokens",
        "Tokens in a rate limit's bucket now (a limit without a key).",
        labels=["limit"],
    )
    for u in use:
        name = u.limit.name
        if u.limit.concurrency_cap is not None:
            held.add_metric([name], u.held)
            slots.add_metric([name], u.limit.concurrency_cap)
        if u.tokens is not None:
            tokens.add_metric([name], u.tokens)
    return [held, slots, tokens]


def _server_families(ctx: ServerContext) -> list[Metric]:
    stats = ctx.orchestrator.stats if ctx.orchestrator is not None else None
    requests = CounterMetricFamily(
        "keepgoing_server_http_requests_total",
        "HTTP requests this server process answered, by status.",
        labels=["status"],
    )
    for status, n in sorted(ctx.counters.requests.items()):
        requests.add_metric([str(status)], n)
    return [
        CounterMetricFamily(
            "keepgoing_server_timers_fired_total",
            "Timers this server process fired.",
            value=stats.timers_fired if stats else 0,
        ),
        CounterMetricFamily(
            "keepgoing_server_leases_reaped_total",
            "Expired task leases this server process reaped.",
            value=stats.leases_reaped if stats else 0,
        ),
        requests,
    ]
