"""Values a database refuses, named: which field of which store call held one.

Payloads are checked before they reach a store (:mod:`keepgoing._payload`);
the other values of a request (ids, names, reasons, limits) go to the driver
as they are. Where the driver or the database refuses one (text with a lone
surrogate, an integer past 64 bits, text with a NUL character on PostgreSQL,
a value of a type it cannot bind), the transport raises
:class:`RefusedValueError` and the store method that was called looks through
its own arguments for the value and names it (:func:`name_refused`), so the
caller reads ``PayloadError: SQLite refused cancel_run's
request.reason: text with a lone surrogate`` instead of a driver's message.

Only the failure path pays: nothing is looked at unless a value was refused.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import math
import sqlite3
from collections.abc import Callable, Coroutine, Iterator
from typing import Any, TypeVar

from keepgoing.errors import PayloadError

__all__ = ["RefusedValueError", "name_refused", "refused_by_sqlite", "why_refused"]

C = TypeVar("C", bound=type)

_INT64 = 2**63
#: Fields that hold payloads: encoded to JSON before the store writes them, so
#: any value JSON takes is stored; they are not where a refused value is.
_PAYLOADS = frozenset({"input", "payload", "result", "args", "kwargs", "detail", "info", "error"})


class RefusedValueError(PayloadError):
    """A value of the request that the database (``dialect``) would not store."""

    def __init__(self, dialect: str, cause: BaseException, where: str | None = None) -> None:
        self.dialect = dialect
        self.cause = cause
        self.named = where is not None
        if where is None:
            message = f"{dialect} cannot store a value of this request: {cause}"
        else:
            message = f"{dialect} refused {where}"
        super().__init__(message)


def refused_by_sqlite(exc: BaseException) -> bool:
    """Whether SQLite (or its driver) refused a value, rather than failed."""
    if isinstance(exc, ValueError | TypeError | OverflowError):
        return True  # a lone surrogate (UnicodeEncodeError), an int past 64 bits
    if isinstance(exc, sqlite3.InterfaceError | sqlite3.DataError):
        return True  # a type it cannot bind, a string or blob too big
    return isinstance(exc, sqlite3.ProgrammingError) and "binding parameter" in str(exc)


def why_refused(value: object, dialect: str) -> str | None:
    """What about ``value`` a database refuses, or None if it takes it."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            return f"text with a lone surrogate ({value[exc.start]!r} at index {exc.start})"
        if dialect == "PostgreSQL" and "\x00" in value:
            return f"text with a NUL character (at index {value.index(chr(0))})"
        return None
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        if not -_INT64 <= value < _INT64:
            return f"an integer beyond 64 bits ({len(str(abs(value)))} digits)"
        return None
    if isinstance(value, float):
        return "a NaN" if math.isnan(value) else None
    if isinstance(value, bytes | bytearray | memoryview):
        return None
    if isinstance(value, set | frozenset):
        return f"a {type(value).__name__}, not a list"
    return None


def _places(value: object, path: str, depth: int = 0) -> Iterator[tuple[str, object]]:
    """Every value inside ``value`` with its path, payload fields left out."""
    yield path, value
    if depth > 8 or isinstance(value, str | bytes | bytearray):
        return
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            if f.name not in _PAYLOADS:
                yield from _places(getattr(value, f.name), f"{path}.{f.name}", depth + 1)
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            yield from _places(item, f"{path}[{i}]", depth + 1)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _places(item, f"{path}[{key!r}]", depth + 1)


def _describe(method: str, arguments: dict[str, Any], refused: RefusedValueError) -> str | None:
    for name, value in arguments.items():
        for path, inner in _places(value, name):
            reason = why_refused(inner, refused.dialect)
            if reason is not None:
                return f"{method}'s {path}: {reason}"
    return None


def name_refused(cls: C) -> C:
    """Wrap the public coroutine methods ``cls`` defines so that a
    :class:`RefusedValueError` names the argument that held the value."""
    for name, fn in list(vars(cls).items()):
        if name.startswith("_") or not inspect.iscoroutinefunction(fn):
            continue
        setattr(cls, name, _naming(name, fn))
    return cls


def _naming(
    name: str, fn: Callable[..., Coroutine[Any, Any, Any]]
) -> Callable[..., Coroutine[Any, Any, Any]]:
    signature = inspect.signature(fn)

    @functools.wraps(fn)
    async def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return await fn(self, *args, **kwargs)
        except RefusedValueError as exc:
            if exc.named:
                raise
            bound = signature.bind(self, *args, **kwargs)
            arguments = {k: v for k, v in bound.arguments.items() if k != "self"}
            where = _describe(name, arguments, exc)
            if where is None:
                raise
            raise RefusedValueError(exc.dialect, exc.cause, where) from exc.cause

    return method
