"""The gateway's ``/metrics`` families, per (model that answered, provider), from the ledger.

Store-wide like the run series: every server sharing the store shows the same
numbers. They are sums over the ledger (a grouped scan of ``gateway_calls``),
given to the server's one registry (:mod:`keepgoing._server.metrics`) as
``prometheus_client`` families.
"""

from __future__ import annotations

from prometheus_client.core import CounterMetricFamily, SummaryMetricFamily
from prometheus_client.metrics_core import Metric

from keepgoing._store.gateway_protocol import ModelUsage

__all__ = ["gateway_families"]

_BY = ["model", "provider"]


def gateway_families(rows: list[ModelUsage]) -> list[Metric]:
    calls = CounterMetricFamily(
        "keepgoing_gateway_calls_total",
        "Model calls through the gateway, and those that failed or were refused.",
        labels=[*_BY, "outcome"],
    )
    tokens = CounterMetricFamily(
        "keepgoing_gateway_tokens_total",
        "Tokens of model calls, by direction (input, output).",
        labels=[*_BY, "direction"],
    )
    cost = CounterMetricFamily(
        "keepgoing_gateway_cost_usd_total",
        "What model calls cost, in US dollars, from the configured prices.",
        labels=_BY,
    )
    latency = SummaryMetricFamily(
        "keepgoing_gateway_latency_seconds",
        "How long model calls took, end to end.",
        labels=_BY,
    )
    for row in rows:
        by = [row.model, row.provider or ""]
        calls.add_metric([*by, "ok"], row.calls - row.errors)
        calls.add_metric([*by, "error"], row.errors)
        tokens.add_metric([*by, "input"], row.input_tokens)
        tokens.add_metric([*by, "output"], row.output_tokens)
        cost.add_metric(by, float(row.cost))
        latency.add_metric(by, count_value=row.calls, sum_value=float(row.latency_sum))
    return [calls, tokens, cost, latency]
