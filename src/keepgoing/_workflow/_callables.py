"""Shared helpers for task and workflow definitions: origin, signature, JSON checks."""

from __future__ import annotations

import functools
import hashlib
import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from keepgoing._payload import MAX_DEPTH, check_json, plain
from keepgoing.errors import PayloadError

__all__ = ["bind_arguments", "check_call", "code_version", "origin_of", "positional_names"]


def origin_of(fn: Callable[..., Any]) -> str:
    code = getattr(fn, "__code__", None)
    where = f"{code.co_filename}:{code.co_firstlineno}" if code else repr(fn)
    return f"{where} ({getattr(fn, '__qualname__', fn)})"


def code_version(fn: Callable[..., Any]) -> str:
    """The hash of the file that defines ``fn`` (its source when the file is gone)."""
    code = getattr(fn, "__code__", None)
    data = b""
    if code is not None:
        try:
            with open(code.co_filename, "rb") as handle:
                data = handle.read()
        except OSError:
            data = code.co_code
    return hashlib.sha256(data).hexdigest()[:12]


@functools.lru_cache(maxsize=4096)
def _signature(fn: Callable[..., Any]) -> inspect.Signature:
    return inspect.signature(fn)


def positional_names(fn: Callable[..., Any]) -> tuple[str, ...]:
    """The names ``fn``'s positional arguments bind to, in order (the ones a
    ``*args`` takes have none: they are numbered where named)."""
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    try:
        params = _signature(fn).parameters.values()
    except (TypeError, ValueError):  # no signature to read: arguments are numbered
        return ()
    return tuple(p.name for p in params if p.kind in kinds)


def check_call(
    fn: Callable[..., Any], args: Sequence[Any], kwargs: Mapping[str, Any], what: str
) -> None:
    """Raise ``TypeError`` naming ``what`` if ``args``/``kwargs`` do not fit ``fn``."""
    try:
        _signature(fn).bind(*args, **kwargs)
    except TypeError as exc:
        raise TypeError(f"{what}: {exc}") from None


def bind_arguments(
    fn: Callable[..., Any],
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    what: str,
) -> tuple[list[Any], dict[str, Any]]:
    """Check that ``args``/``kwargs`` fit ``fn`` and are JSON; name the argument at fault.

    Returns their decoded JSON copies: what the other side gets, live or in replay.
    """
    check_call(fn, args, kwargs, what)
    try:
        plain_args, plain_kwargs = plain([args, kwargs], what, max_depth=MAX_DEPTH + 1)
    except PayloadError:
        bound = _signature(fn).bind(*args, **kwargs)
        for name, value in bound.arguments.items():
            check_json(value, f"argument {name!r} of {what}")
        raise
    return plain_args, plain_kwargs
