"""The store's gateway facet: the usage ledger of model calls and the limits of gateway keys.

Every model call the gateway makes gets one :class:`GatewayCall` row, written
when the call ends (a streamed call when its stream ends, with its final
usage). A call made inside a task attempt carries the attempt's run id, step
and attempt number with ``attempt_state='open'``; the transaction that records
the attempt's outcome turns its rows into ``committed`` (the step succeeded
with this attempt), ``failed`` (the attempt raised or timed out) or ``lost``
(its worker died or handed it back). So a killed attempt's calls are kept, and
never count as the step's success.

Budgets are read from the ledger (per key: a per-day roll-up kept in the same
transaction as each row, and the rows of the last minute), so they hold across
restarts and across every server sharing the store.

``tests/contract/test_gateway_ledger.py`` checks every backend.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "ATTEMPT_STATES",
    "RESERVATION_TTL",
    "USAGE_GROUPS",
    "USAGE_MAX_POINTS",
    "GatewayCall",
    "GatewayKey",
    "GatewayStore",
    "KeyUsage",
    "ModelUsage",
    "UsagePoint",
    "UsageQuery",
    "UsageReport",
    "UsageRow",
]

#: Seconds a reservation (a 'pending' row) holds its key's budget when it is never
#: settled (its server died mid-call); a call that settles does so at once.
RESERVATION_TTL = 900.0

AttemptState = Literal["none", "open", "committed", "failed", "lost"]
ATTEMPT_STATES: tuple[str, ...] = ("none", "open", "committed", "failed", "lost")


@dataclass(frozen=True)
class GatewayCall:
    """One model call. ``key_id`` is the gateway key's token id (``""`` for a call
    made in-process or on a server without authentication).

    ``status`` is ``ok``, ``error`` (every provider tried failed), ``refused``
    (over a key's limit, nothing was sent to a provider), ``cancelled`` (the
    client went away mid-stream), ``truncated`` (a stream cut after its answer
    began) or ``pending`` (admitted and running: its tokens and cost are the
    reservation made at admission, replaced by the real figures when it settles).
    ``prompt`` and ``answer`` are JSON text, or None when the gateway's ``prompts``
    setting is ``off``.
    """

    call_id: str
    key_id: str
    operation: str  # "chat" | "embeddings"
    model_asked: str
    model_answered: str | None
    provider: str | None
    input_tokens: int
    output_tokens: int
    cost: float
    latency: float
    ttft: float | None
    status: str
    created_at: float
    error: str | None = None
    streamed: bool = False
    tries: int = 1
    run_id: str | None = None
    step: int | None = None
    attempt: int | None = None
    operation_id: str | None = None
    attempt_state: AttemptState = "none"
    prompt: str | None = None
    answer: str | None = None

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def to_json(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


@dataclass(frozen=True)
class GatewayKey:
    """The limits of a gateway key (a token with ``gateway.use``). None means no limit;
    ``models`` None allows every configured model. Budgets are in US dollars."""

    token_id: str
    models: tuple[str, ...] | None = None
    requests_per_minute: int | None = None
    tokens_per_minute: int | None = None
    daily_budget: float | None = None
    total_budget: float | None = None
    updated_at: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "token_id": self.token_id,
            "models": list(self.models) if self.models is not None else None,
            "requests_per_minute": self.requests_per_minute,
            "tokens_per_minute": self.tokens_per_minute,
            "daily_budget": self.daily_budget,
            "total_budget": self.total_budget,
            "updated_at": self.updated_at,
        }


@dataclass(frozen=True)
class KeyUsage:
    """What a key has used: in the minute before ``now``, today (UTC) and ever.
    ``minute_oldest`` is when the oldest call of that minute was made."""

    minute_requests: int
    minute_tokens: int
    minute_oldest: float | None
    day_cost: float
    total_cost: float


@dataclass(frozen=True)
class ModelUsage:
    """Totals of the calls answered by one model (``model`` is the model asked when
    no provider answered)."""

    model: str
    provider: str | None
    calls: int
    errors: int
    input_tokens: int
    output_tokens: int
    cost: float
    latency_sum: float


#: What :meth:`GatewayStore.gateway_usage` groups the ledger by. ``step`` is a step of
#: one run (run id and step), ``attempt`` one attempt of it; ``workflow`` is the name
#: of the run's workflow (None for calls made outside a run).
USAGE_GROUPS: tuple[str, ...] = ("workflow", "run", "step", "attempt", "model", "key")
#: The most points a usage series may have (and rows a report may be asked for).
USAGE_MAX_POINTS = 10_000


@dataclass(frozen=True)
class UsageQuery:
    """Ledger rows created in ``[since, until)``, narrowed by the filters that are set,
    grouped by ``group_by`` (one of :data:`USAGE_GROUPS`); with ``bucket`` (seconds),
    also totals per ``bucket`` from ``since`` on, for a chart over time."""

    since: float
    until: float
    group_by: str = "model"
    workflow: str | None = None
    run_id: str | None = None
    step: int | None = None
    model: str | None = None
    key_id: str | None = None
    bucket: float | None = None
    limit: int = 100


@dataclass(frozen=True)
class UsageRow:
    """The totals of one group of ledger rows. The key fields the query did not group
    by are None. ``errors`` counts calls no provider answered, ``refused`` calls over
    a key's limit (no provider was asked). ``attempt_state`` (by attempt only) is how
    the attempt ended: ``open``, ``committed``, ``failed`` or ``lost``."""

    workflow: str | None
    run_id: str | None
    step: int | None
    attempt: int | None
    model: str | None
    key_id: str | None
    attempt_state: str | None
    calls: int
    errors: int
    refused: int
    input_tokens: int
    output_tokens: int
    cost: float
    latency_sum: float
    latency_max: float
    first_at: float | None
    last_at: float | None

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    @property
    def latency_avg(self) -> float | None:
        return self.latency_sum / self.calls if self.calls else None


@dataclass(frozen=True)
class UsagePoint:
    """The calls created in ``[at, at + bucket)``."""

    at: float
    calls: int
    input_tokens: int
    output_tokens: int
    cost: float


@dataclass(frozen=True)
class UsageReport:
    """What :meth:`GatewayStore.gateway_usage` returns: ``rows`` most expensive first,
    ``totals`` over every row the filters match (its key fields are None), and the
    chart's ``points`` (only buckets with calls), oldest first."""

    rows: list[UsageRow]
    totals: UsageRow
    points: list[UsagePoint]
    bucket: float | None


class GatewayStore(abc.ABC):
    """The usage ledger and key limits. Methods may raise :class:`~keepgoing.errors.StoreError`."""

    @abc.abstractmethod
    async def record_gateway_call(self, call: GatewayCall) -> None:
        """Append ``call`` to the ledger (or settle its ``pending`` reservation in place)
        and add it to its key's daily roll-up. Text the store could not hold (a lone
        surrogate, a NUL) is kept escaped: a call is never left unmetered.

        Raises:
            StoreError: a row with ``call.call_id`` exists and is not pending.
        """

    @abc.abstractmethod
    async def reserve_gateway_call(
        self,
        call: GatewayCall,
        now: float,
        refuse: Callable[[GatewayKey, KeyUsage], Exception | None],
    ) -> Exception | None:
        """Admit ``call`` against its key's limits, in one transaction that holds the key.

        The key's usage (settled calls, and the reservations of calls not settled yet)
        is read and ``refuse(key, usage)`` asked. None: ``call`` is inserted as a
        ``pending`` row, whose tokens and cost are its reservation, and None returned;
        :meth:`record_gateway_call` with the same ``call_id`` settles it. Else a
        ``refused`` row is inserted and the refusal returned. A key without limits
        row admits every call. Concurrent admissions of one key take turns, so a limit
        of N calls admits N, on every store and across processes.
        """

    @abc.abstractmethod
    async def gateway_key_usage(self, key_id: str, now: float) -> KeyUsage:
        """What ``key_id`` has used (refused calls count for nothing; the reservations
        of pending calls count as used)."""

    @abc.abstractmethod
    async def gateway_key_state(
        self, token_id: str, now: float
    ) -> tuple[GatewayKey | None, KeyUsage | None]:
        """The limits of ``token_id`` and, when it has any, its usage: one read."""

    @abc.abstractmethod
    async def list_gateway_calls(
        self,
        *,
        key_id: str | None = None,
        run_id: str | None = None,
        since: float | None = None,
        limit: int = 100,
    ) -> list[GatewayCall]:
        """Ledger rows, newest first, filtered by key, run and creation time."""

    @abc.abstractmethod
    async def gateway_usage(self, query: UsageQuery) -> UsageReport:
        """The ledger's totals by ``query.group_by``, with the totals of everything the
        filters match and, with ``query.bucket``, a series over time: one read.

        Raises:
            ValueError: an unknown ``group_by``, ``since > until``, a bucket that is
                not positive or makes more than 10,000 points, or ``limit`` outside
                1..10,000.
        """

    @abc.abstractmethod
    async def gateway_usage_by_model(self, *, since: float | None = None) -> list[ModelUsage]:
        """Totals per (model answered, provider), most expensive first."""

    @abc.abstractmethod
    async def set_gateway_key(self, key: GatewayKey) -> None:
        """Create or replace the limits of ``key.token_id``."""

    @abc.abstractmethod
    async def get_gateway_key(self, token_id: str) -> GatewayKey | None:
        """The limits of ``token_id``, or None when none were set (no limits)."""

    @abc.abstractmethod
    async def list_gateway_keys(self) -> list[GatewayKey]:
        """Every key with limits, oldest change first."""
