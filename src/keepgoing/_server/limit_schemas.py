"""Bodies of the flow-control route: each declared limit and its use now."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from keepgoing._store.limits_protocol import LimitUse

__all__ = ["LimitList", "LimitView"]


class LimitView(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="The limit's name: a named limit's, or its task's own.")
    concurrency: int | None = Field(
        None, description="Slots: attempts at once (per key when keyed); None without a cap."
    )
    keyed: bool = Field(False, description="Slots and tokens are per value of an argument.")
    rate: str | None = Field(None, description='The rate, as "TOKENS/PERIODs"; None without.')
    burst: int | None = Field(None, description="Tokens the bucket holds when full.")
    held: int = Field(0, description="Slots held now, over every key.")
    waiting: int = Field(0, description="Attempts of tasks with this limit waiting to start.")
    tokens: float | None = Field(
        None, description="Tokens in the bucket now (a rate limit without a key)."
    )

    @classmethod
    def of(cls, use: LimitUse) -> LimitView:
        limit = use.limit
        rate = None
        if limit.rate_tokens is not None and limit.rate_period is not None:
            rate = f"{limit.rate_tokens}/{limit.rate_period:g}s"
        return cls(
            name=limit.name,
            concurrency=limit.concurrency_cap,
            keyed=limit.keyed,
            rate=rate,
            burst=limit.rate_burst,
            held=use.held,
            waiting=use.waiting,
            tokens=None if use.tokens is None else round(use.tokens, 3),
        )


class LimitList(BaseModel):
    model_config = ConfigDict(extra="forbid")

    limits: list[LimitView] = Field(description="Every limit a worker declared, by name.")
