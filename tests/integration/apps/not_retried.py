"""Tasks whose errors are not retried: NonRetryableError, retry_on and give_up_on."""

from __future__ import annotations

from kg_effects import attempt, record

import keepgoing


class RateLimitedError(Exception):
    """A retryable refusal, named in retry_on."""


class Refused(keepgoing.NonRetryableError):
    """A subclass: still never retried."""


class BadStr(Exception):
    """An exception whose str() fails."""

    def __str__(self) -> str:
        raise RuntimeError("no text for you")


@keepgoing.task(retries=5)
def refuses(key: str) -> str:
    record("start", "refuses", key, attempt())
    raise Refused("the account is closed")


@keepgoing.task(retries=5, retry_on=(TimeoutError, RateLimitedError))
def picky(key: str, kind: str) -> str:
    n = attempt()
    record("start", "picky", key, n)
    if n == 1 and kind == "rate":
        raise RateLimitedError("slow down")
    if kind == "key":
        raise KeyError("not in retry_on")
    return f"ok on attempt {n}"


@keepgoing.task(retries=5, give_up_on=(ValueError,))
def careful(key: str, kind: str) -> str:
    n = attempt()
    record("start", "careful", key, n)
    if kind == "value":
        raise ValueError("a bad value")
    if kind == "badstr":
        raise BadStr()
    if n < 3:
        raise RuntimeError(f"transient {n}")
    return f"ok on attempt {n}"


@keepgoing.task(retries=5, retry_on=KeyError)
def bad_str_not_retried(key: str) -> str:
    record("start", "bad_str_not_retried", key, attempt())
    raise BadStr()


@keepgoing.workflow
async def run_refuses(key: str) -> str:
    return await refuses(key)


@keepgoing.workflow
async def run_picky(key: str, kind: str) -> str:
    return await picky(key, kind)


@keepgoing.workflow
async def run_careful(key: str, kind: str) -> str:
    return await careful(key, kind)


@keepgoing.workflow
async def run_bad_str(key: str) -> str:
    return await bad_str_not_retried(key)
