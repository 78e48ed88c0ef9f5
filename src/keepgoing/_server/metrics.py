"""``/metrics`` in the Prometheus text format (version 0.0.4).

Store-wide views (runs by status, queue depth, workers, step latency, lease
expiries) are the same whichever server is scraped; the ``keepgoing_server_*``
series are this process's own (its orchestrator and its HTTP requests).
"""

from __future__ import annotations

from collections.abc import Iterable

from keepgoing._gateway.metrics import gateway_series
from keepgoing._server.context import ServerContext
from keepgoing._store.observe_protocol import STEP_BUCKETS

__all__ = ["CONTENT_TYPE", "render"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
STATUSES = ("running", "blocked", "completed", "failed", "cancelled", "continued")
_QUEUE_KINDS = ("runnable_runs", "ready_tasks", "delayed_tasks", "running_tasks")


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float) -> str:
    return repr(float(value)) if isinstance(value, float) else str(value)


def _family(name: str, kind: str, help_text: str, samples: Iterable[str]) -> list[str]:
    return [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}", *samples]


async def render(ctx: ServerContext) -> str:
    store = ctx.store
    counts = await store.run_counts()
    depths = await store.queue_depths(ctx.clock.now())
    workers = [w for w in await store.list_workers() if w.lost_at is None]
    steps = await store.step_metrics()
    lines: list[str] = []
    lines += _family(
        "keepgoing_runs",
        "gauge",
        "Runs by status.",
        (f'keepgoing_runs{{status="{s}"}} {counts.get(s, 0)}' for s in STATUSES),
    )
    lines += _family(
        "keepgoing_queue_depth",
        "gauge",
        "Work waiting on each queue: runnable runs plus ready tasks.",
        (f'keepgoing_queue_depth{{queue="{_label(q.queue)}"}} {q.depth}' for q in depths),
    )
    lines += _family(
        "keepgoing_queue_items",
        "gauge",
        "Queue contents by kind (runnable_runs, ready_tasks, delayed_tasks, running_tasks).",
        (
            f'keepgoing_queue_items{{queue="{_label(q.queue)}",kind="{k}"}} {getattr(q, k)}'
            for q in depths
            for k in _QUEUE_KINDS
        ),
    )
    lines += _family(
        "keepgoing_workers",
        "gauge",
        "Live registered workers.",
        [f"keepgoing_workers {len(workers)}"],
    )
    lines += _family(
        "keepgoing_worker_hung_threads",
        "gauge",
        "Threads still running a sync task body whose attempt timed out, per worker.",
        (
            f'keepgoing_worker_hung_threads{{worker="{_label(w.worker_id)}"}} '
            f"{int(w.info.get('hung_threads', 0) or 0)}"
            for w in workers
        ),
    )
    buckets = [
        f'keepgoing_step_duration_seconds_bucket{{le="{le:g}"}} {n}'
        for le, n in zip(STEP_BUCKETS, steps.buckets, strict=True)
    ]
    buckets += [
        f'keepgoing_step_duration_seconds_bucket{{le="+Inf"}} {steps.count}',
        f"keepgoing_step_duration_seconds_sum {_number(steps.total_seconds)}",
        f"keepgoing_step_duration_seconds_count {steps.count}",
    ]
    lines += _family(
        "keepgoing_step_duration_seconds",
        "histogram",
        "How long completed steps took (the successful attempt).",
        buckets,
    )
    lines += _family(
        "keepgoing_lease_expiries_total",
        "counter",
        "Task attempts recovered because their worker stopped renewing its lease.",
        [f"keepgoing_lease_expiries_total {steps.lease_expiries}"],
    )
    lines += gateway_series(await store.gateway_usage_by_model())
    lines += _server_series(ctx)
    return "\n".join(lines) + "\n"


def _server_series(ctx: ServerContext) -> list[str]:
    stats = ctx.orchestrator.stats if ctx.orchestrator is not None else None
    lines = _family(
        "keepgoing_server_timers_fired_total",
        "counter",
        "Timers this server process fired.",
        [f"keepgoing_server_timers_fired_total {stats.timers_fired if stats else 0}"],
    )
    lines += _family(
        "keepgoing_server_leases_reaped_total",
        "counter",
        "Expired task leases this server process reaped.",
        [f"keepgoing_server_leases_reaped_total {stats.leases_reaped if stats else 0}"],
    )
    lines += _family(
        "keepgoing_server_http_requests_total",
        "counter",
        "HTTP requests this server process answered, by status.",
        (
            f'keepgoing_server_http_requests_total{{status="{status}"}} {n}'
            for status, n in sorted(ctx.counters.requests.items())
        ),
    )
    return lines
