"""The gateway's ``/metrics`` series, per (model that answered, provider), from the ledger.

Store-wide like the run series: every server sharing the store shows the same
numbers. They are sums over the ledger (a grouped scan of ``gateway_calls``).
"""

from __future__ import annotations

from collections.abc import Iterable

from keepgoing._store.gateway_protocol import ModelUsage

__all__ = ["gateway_series"]


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _family(name: str, kind: str, help_text: str, samples: Iterable[str]) -> list[str]:
    return [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}", *samples]


def gateway_series(rows: list[ModelUsage]) -> list[str]:
    def labels(row: ModelUsage, extra: str = "") -> str:
        text = f'model="{_label(row.model)}",provider="{_label(row.provider or "")}"'
        return "{" + text + extra + "}"

    lines = _family(
        "keepgoing_gateway_calls_total",
        "counter",
        "Model calls through the gateway, and those that failed or were refused.",
        (
            f"keepgoing_gateway_calls_total{labels(r, ',outcome=' + chr(34) + o + chr(34))} {n}"
            for r in rows
            for o, n in (("ok", r.calls - r.errors), ("error", r.errors))
        ),
    )
    lines += _family(
        "keepgoing_gateway_tokens_total",
        "counter",
        "Tokens of model calls, by direction (input, output).",
        (
            f"keepgoing_gateway_tokens_total{labels(r, ',direction=' + chr(34) + d + chr(34))} {n}"
            for r in rows
            for d, n in (("input", r.input_tokens), ("output", r.output_tokens))
        ),
    )
    lines += _family(
        "keepgoing_gateway_cost_usd_total",
        "counter",
        "What model calls cost, in US dollars, from the configured prices.",
        (f"keepgoing_gateway_cost_usd_total{labels(r)} {float(r.cost)!r}" for r in rows),
    )
    lines += _family(
        "keepgoing_gateway_latency_seconds",
        "summary",
        "How long model calls took, end to end.",
        (
            line
            for r in rows
            for line in (
                f"keepgoing_gateway_latency_seconds_sum{labels(r)} {float(r.latency_sum)!r}",
                f"keepgoing_gateway_latency_seconds_count{labels(r)} {r.calls}",
            )
        ),
    )
    return lines
