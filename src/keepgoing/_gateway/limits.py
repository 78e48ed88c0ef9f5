"""A gateway key's limits against what the ledger says it has used."""

from __future__ import annotations

import calendar
import time

from keepgoing._store.gateway_protocol import GatewayKey, KeyUsage
from keepgoing.errors import BudgetExceededError, GatewayError

__all__ = ["check_model", "check_usage", "has_usage_limits", "next_utc_midnight", "refusal"]


def next_utc_midnight(now: float) -> float:
    day = time.gmtime(now)
    return float(calendar.timegm((day.tm_year, day.tm_mon, day.tm_mday, 0, 0, 0))) + 86400.0


def check_model(key: GatewayKey | None, model: str) -> None:
    """Raises GatewayError (403 ``model_not_allowed``) if ``key`` may not call ``model``."""
    if key is None or key.models is None or model in key.models:
        return
    allowed = ", ".join(key.models) or "none"
    raise GatewayError(
        f"this key may not use model {model!r}; it is allowed: {allowed}",
        status=403,
        error_code="model_not_allowed",
        param="model",
    )


def has_usage_limits(key: GatewayKey | None) -> bool:
    return key is not None and any(
        v is not None
        for v in (
            key.requests_per_minute,
            key.tokens_per_minute,
            key.daily_budget,
            key.total_budget,
        )
    )


def check_usage(key: GatewayKey, usage: KeyUsage, now: float) -> None:
    """Raises BudgetExceededError (429) naming the first limit ``usage`` has reached."""
    minute_reset = (usage.minute_oldest or now) + 60.0
    if key.requests_per_minute is not None and usage.minute_requests >= key.requests_per_minute:
        raise BudgetExceededError(
            f"over the key's limit of {key.requests_per_minute} requests per minute "
            f"({usage.minute_requests} in the last minute)",
            limit="requests_per_minute",
            resets_at=minute_reset,
        )
    if key.tokens_per_minute is not None and usage.minute_tokens >= key.tokens_per_minute:
        raise BudgetExceededError(
            f"over the key's limit of {key.tokens_per_minute} tokens per minute "
            f"({usage.minute_tokens} in the last minute)",
            limit="tokens_per_minute",
            resets_at=minute_reset,
        )
    if key.daily_budget is not None and usage.day_cost >= key.daily_budget:
        raise BudgetExceededError(
            f"over the key's daily budget of ${key.daily_budget:g} "
            f"(${usage.day_cost:.6f} spent today, UTC)",
            limit="daily_budget",
            resets_at=next_utc_midnight(now),
        )
    if key.total_budget is not None and usage.total_cost >= key.total_budget:
        raise BudgetExceededError(
            f"over the key's total budget of ${key.total_budget:g} "
            f"(${usage.total_cost:.6f} spent); raise it with `keepgoing gateway keys set`",
            limit="total_budget",
            resets_at=None,
        )


def refusal(key: GatewayKey, usage: KeyUsage, now: float) -> BudgetExceededError | None:
    """The error :func:`check_usage` would raise, or None: what the store's admission
    asks inside the transaction that reserves the call."""
    try:
        check_usage(key, usage, now)
    except BudgetExceededError as exc:
        return exc
    return None
