"""Flow control values: concurrency limits, rate limits and named limits.

A **concurrency limit** caps how many attempts (or open runs) hold a slot at
once, across every worker on the store: ``Concurrency(3)``, or per value of an
argument, ``Concurrency(2, key="customer_id")``. A **rate limit** is a token
bucket shared by every worker: ``RateLimit("10/s")`` refills ten tokens a
second; ``burst`` is how many tokens the bucket holds (default one), so in any
one-period window at most ``tokens + burst`` attempts start. A **named limit**,
``define("crm", rate="20/s")``, is one bucket or one set of slots shared by
every task that names it (``@task(rate_limit="crm")``).

Everything here is checked when the decorator runs, so a bad limit fails at
import time with an :class:`InvalidLimitError` naming the function and the
problem. This module is plain values; the store enforces them at claim time.
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from keepgoing._durations import parse_duration
from keepgoing.errors import InvalidDurationError, InvalidLimitError

__all__ = [
    "Concurrency",
    "InvalidLimitError",
    "NamedLimit",
    "RateLimit",
    "check_concurrency",
    "check_rate_limit",
    "define",
    "declared_limits",
    "defined",
    "key_value",
    "named",
    "parse_rate",
    "resolve",
]

Key = str | Callable[..., object] | None

_RATE = re.compile(r"\s*([0-9]+)\s*/\s*(.+?)\s*")
_RATE_FORMS = '"10/s", "100/m", "5/h" or "2/500ms" (tokens per period)'
_NAME = re.compile(r"[A-Za-z0-9_.:-]{1,100}")


def parse_rate(text: str) -> tuple[int, float]:
    """``"10/s"`` -> ``(10, 1.0)``: tokens per period and the period in seconds.

    Raises:
        InvalidLimitError: ``text`` is not a rate; the message names it.
    """
    if not isinstance(text, str):
        raise InvalidLimitError(f"a rate must be a string such as {_RATE_FORMS}, not {text!r}")
    match = _RATE.fullmatch(text)
    if match is None:
        raise InvalidLimitError(f"rate {text!r} is not a rate; use {_RATE_FORMS}")
    tokens, period_text = int(match.group(1)), match.group(2)
    if period_text[0].isalpha():  # "10/s" means one second
        period_text = "1" + period_text
    try:
        period = parse_duration(period_text, what=f"period of rate {text!r}")
    except InvalidDurationError:
        raise InvalidLimitError(f"rate {text!r} is not a rate; use {_RATE_FORMS}") from None
    if tokens < 1 or period <= 0:
        raise InvalidLimitError(f"rate {text!r} must allow at least one token per non-zero period")
    return tokens, period


@dataclass(frozen=True)
class Concurrency:
    """At most ``limit`` attempts at once, across every worker; per ``key`` value if given.

    ``key`` names an argument of the decorated function, or is a callable given
    the call's arguments that returns the key (any JSON value).
    """

    limit: int
    key: Key = None

    def __post_init__(self) -> None:
        _check_cap(self.limit, "concurrency")
        _check_key_type(self.key)


@dataclass(frozen=True)
class RateLimit:
    """A token bucket: ``rate`` tokens per period, holding at most ``burst`` tokens.

    One token is taken per attempt started; an attempt with no token waits,
    holding no worker thread, until the next token is due.
    """

    rate: str
    key: Key = None
    burst: int | None = None
    tokens: int = field(init=False, repr=False, compare=False)
    period: float = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        tokens, period = parse_rate(self.rate)
        object.__setattr__(self, "tokens", tokens)
        object.__setattr__(self, "period", period)
        if self.burst is not None:
            _check_cap(self.burst, "burst")
        _check_key_type(self.key)

    @property
    def capacity(self) -> int:
        """How many tokens the bucket holds when full (``burst``, default one)."""
        return 1 if self.burst is None else self.burst


@dataclass(frozen=True)
class NamedLimit:
    """A limit defined once with :func:`define` and shared by the tasks that name it."""

    name: str
    rate: RateLimit | None = None
    concurrency: int | None = None


_defined: dict[str, NamedLimit] = {}


def define(
    name: str,
    *,
    rate: str | None = None,
    burst: int | None = None,
    concurrency: int | None = None,
) -> None:
    """Define a named limit shared by every task that names it.

    ``define("crm", rate="20/s")`` then ``@task(rate_limit="crm")``;
    ``define("db", concurrency=5)`` then ``@task(concurrency="db")``. Define it
    before the tasks that use it. Defining the same name again with the same
    values is allowed (a module imported twice); with other values it is not.

    Raises:
        InvalidLimitError: a bad name, rate, burst or cap, neither ``rate`` nor
            ``concurrency`` given, or the name already defined otherwise.
    """
    if not isinstance(name, str) or _NAME.fullmatch(name) is None:
        raise InvalidLimitError(
            f"a limit's name must be 1-100 letters, digits or _.:- characters, not {name!r}"
        )
    if rate is None and concurrency is None:
        raise InvalidLimitError(f"limit {name!r} needs rate=..., concurrency=..., or both")
    if burst is not None and rate is None:
        raise InvalidLimitError(f"limit {name!r}: burst= needs rate=")
    try:
        limit = NamedLimit(
            name,
            None if rate is None else RateLimit(rate, burst=burst),
            None if concurrency is None else Concurrency(concurrency).limit,
        )
    except InvalidLimitError as exc:
        raise InvalidLimitError(f"limit {name!r}: {exc}") from None
    known = _defined.get(name)
    if known is not None and known != limit:
        raise InvalidLimitError(f"limit {name!r} is already defined as {_describe(known)}")
    _defined[name] = limit


def defined() -> dict[str, NamedLimit]:
    """Every named limit defined in this process, by name."""
    return dict(_defined)


def named(name: str) -> NamedLimit:
    """The named limit ``name``.

    Raises:
        InvalidLimitError: no limit of that name is defined.
    """
    try:
        return _defined[name]
    except KeyError:
        known = ", ".join(sorted(_defined)) or "none"
        raise InvalidLimitError(
            f"no limit named {name!r} is defined (defined: {known}); "
            f"call keepgoing.limits.define({name!r}, ...) first"
        ) from None


def check_concurrency(
    value: int | str | Concurrency | None, fn: Callable[..., object], *, where: str
) -> Concurrency | str | None:
    """Validate ``concurrency=`` of ``where`` (e.g. ``"task 'lookup'"``) for ``fn``.

    Returns a :class:`Concurrency`, the name of a defined limit, or None.

    Raises:
        InvalidLimitError: naming ``where`` and the problem.
    """
    if value is None:
        return None
    try:
        if isinstance(value, str):
            if named(value).concurrency is None:
                raise InvalidLimitError(f"limit {value!r} has no concurrency= cap")
            return value
        if isinstance(value, Concurrency):
            _check_key(value.key, fn)
            return value
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidLimitError(
                "concurrency must be an int of at least 1, a Concurrency(...) or the "
                f"name of a defined limit, not {type(value).__name__} {value!r}"
            )
        return Concurrency(value)
    except InvalidLimitError as exc:
        raise InvalidLimitError(f"concurrency of {where}: {exc}") from None


def check_rate_limit(
    value: str | RateLimit | None, fn: Callable[..., object], *, where: str
) -> RateLimit | str | None:
    """Validate ``rate_limit=`` of ``where`` for ``fn``.

    A string is the name of a defined limit if one is defined by that name,
    otherwise a rate such as ``"10/s"``. Returns a :class:`RateLimit`, a
    limit's name, or None.

    Raises:
        InvalidLimitError: naming ``where`` and the problem.
    """
    if value is None:
        return None
    try:
        if isinstance(value, RateLimit):
            _check_key(value.key, fn)
            return value
        if not isinstance(value, str):
            raise InvalidLimitError(
                f"rate_limit must be a rate such as {_RATE_FORMS}, a RateLimit(...) or "
                f"the name of a defined limit, not {type(value).__name__} {value!r}"
            )
        if value in _defined:
            if _defined[value].rate is None:
                raise InvalidLimitError(f"limit {value!r} has no rate=")
            return value
        if _RATE.fullmatch(value) is None and _NAME.fullmatch(value) is not None:
            named(value)  # a bare word: a limit's name that is not defined
        return RateLimit(value)
    except InvalidLimitError as exc:
        raise InvalidLimitError(f"rate_limit of {where}: {exc}") from None


def key_value(
    key: Key, fn: Callable[..., object], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> str | None:
    """The value of ``key`` for one call of ``fn``, as canonical JSON text.

    A name is looked up among the bound arguments (defaults applied); a callable
    is called with the call's arguments. None when ``key`` is None.

    Raises:
        InvalidLimitError: the arguments do not fit ``fn``, or the value is not JSON.
    """
    if key is None:
        return None
    value = key(*args, **kwargs) if callable(key) else _argument(key, fn, args, kwargs)
    try:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError):
        raise InvalidLimitError(
            f"the limit key {_key_name(key)} of {getattr(fn, '__name__', fn)!r} gave "
            f"{type(value).__name__} {value!r}, which is not JSON"
        ) from None


def resolve(
    name: str,
    concurrency: Concurrency | str | None,
    rate_limit: RateLimit | str | None,
    fn: Callable[..., object],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> dict[str, Any] | None:
    """What one call of ``name`` carries of its limits, named limits resolved now.

    The keys are the task row's limit columns (``limit_name``, ``limit_key``,
    ``concurrency_cap``; ``rate_name``, ``rate_key``, ``rate_tokens``,
    ``rate_period``, ``rate_burst``); a limit without a key has the key ``""``.
    None when the call has no limit.
    """
    if concurrency is None and rate_limit is None:
        return None
    row: dict[str, Any] = {}
    if concurrency is not None:
        cap, key, limit_name = _concurrency_of(name, concurrency)
        row["limit_name"], row["concurrency_cap"] = limit_name, cap
        row["limit_key"] = key_value(key, fn, args, kwargs) or ""
    if rate_limit is not None:
        rate, limit_name = _rate_of(name, rate_limit)
        row["rate_name"], row["rate_key"] = limit_name, key_value(rate.key, fn, args, kwargs) or ""
        row["rate_tokens"], row["rate_period"] = rate.tokens, rate.period
        row["rate_burst"] = rate.capacity
    return row


def declared_limits(
    tasks: Iterable[tuple[str, Concurrency | str | None, RateLimit | str | None]],
) -> list[dict[str, Any]]:
    """The limits ``(task name, concurrency, rate_limit)`` triples use, one per name:
    a named limit once however many tasks share it, a task's own under its name."""
    found: dict[str, dict[str, Any]] = {}
    for name, concurrency, rate_limit in tasks:
        if concurrency is not None:
            cap, key, limit_name = _concurrency_of(name, concurrency)
            entry = found.setdefault(limit_name, {"name": limit_name})
            entry["concurrency_cap"] = cap
            entry["keyed"] = entry.get("keyed", False) or key is not None
        if rate_limit is not None:
            rate, limit_name = _rate_of(name, rate_limit)
            entry = found.setdefault(limit_name, {"name": limit_name})
            entry.update(rate_tokens=rate.tokens, rate_period=rate.period)
            entry["rate_burst"] = rate.capacity
            entry["keyed"] = entry.get("keyed", False) or rate.key is not None
    return [found[name] for name in sorted(found)]


def _concurrency_of(name: str, value: Concurrency | str) -> tuple[int, Key, str]:
    if isinstance(value, str):
        cap = named(value).concurrency
        if cap is None:
            raise InvalidLimitError(f"limit {value!r} has no concurrency= cap")
        return cap, None, value
    return value.limit, value.key, name


def _rate_of(name: str, value: RateLimit | str) -> tuple[RateLimit, str]:
    if isinstance(value, str):
        rate = named(value).rate
        if rate is None:
            raise InvalidLimitError(f"limit {value!r} has no rate=")
        return rate, value
    return value, name


def _argument(
    key: str, fn: Callable[..., object], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> object:
    signature = inspect.signature(fn)
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError as exc:
        raise InvalidLimitError(f"arguments of {getattr(fn, '__name__', fn)!r}: {exc}") from None
    bound.apply_defaults()
    if key in bound.arguments:
        return bound.arguments[key]
    for name, param in signature.parameters.items():
        if param.kind is inspect.Parameter.VAR_KEYWORD:
            extra: dict[str, Any] = bound.arguments.get(name, {})
            return extra.get(key)
    return None


def _check_cap(value: object, what: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidLimitError(f"{what} must be an int of at least 1, not {value!r}")


def _check_key_type(key: object) -> None:
    if key is not None and not isinstance(key, str) and not callable(key):
        raise InvalidLimitError(
            f"a limit's key must be an argument's name or a callable, not {key!r}"
        )


def _check_key(key: Key, fn: Callable[..., object]) -> None:
    if key is None or callable(key):
        return
    try:
        parameters = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return  # no signature to check against (a builtin): checked per call
    if key in parameters and parameters[key].kind not in (
        inspect.Parameter.VAR_POSITIONAL,
        inspect.Parameter.VAR_KEYWORD,
    ):
        return
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return  # may come in **kwargs; missing, the key's value is null
    names = ", ".join(parameters) or "none"
    raise InvalidLimitError(
        f"key {key!r} names no argument of {getattr(fn, '__name__', fn)!r} (its arguments: {names})"
    )


def _key_name(key: Key) -> str:
    return repr(key) if isinstance(key, str) else getattr(key, "__name__", repr(key))


def _describe(limit: NamedLimit) -> str:
    parts = []
    if limit.rate is not None:
        parts.append(f"rate={limit.rate.rate!r}")
        if limit.rate.burst is not None:
            parts.append(f"burst={limit.rate.burst}")
    if limit.concurrency is not None:
        parts.append(f"concurrency={limit.concurrency}")
    return ", ".join(parts)
