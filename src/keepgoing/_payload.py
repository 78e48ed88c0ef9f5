"""JSON payloads: the one check and the one encoder every value crosses.

Every value a workflow hands to a task, a task hands back, or a caller hands
to a run is checked and copied here, and every store writes values with
:func:`encode`. So what one store refuses every store refuses, with the same
:class:`PayloadError`, and what the live path hands on is the decoded JSON
copy that replay will see too (a tuple becomes a list, a dict is never shared).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from typing import Any

from keepgoing.errors import PayloadError, PayloadTooLargeError

__all__ = [
    "JSON",
    "MAX_DEPTH",
    "MAX_MESSAGE_BYTES",
    "STORED_DEPTH",
    "check_json",
    "check_message_payload",
    "dumps",
    "encode",
    "loads",
    "message_payload",
    "plain",
    "safe_text",
]

JSON = Any  # a value made only of dict[str, ...], list, str, int, float, bool and None

MAX_DEPTH = 100
"""Lists and objects nest at most this deep in a value (the server's limit too)."""

_INT_BITS = 12_000  # ints this long have fewer digits than Python's default limit of 4,300

STORED_DEPTH = MAX_DEPTH + 6
"""The limit for a stored document: a value plus the envelope of its history event."""


def check_json(value: object, what: str, *, max_depth: int = MAX_DEPTH) -> None:
    """Raise :class:`PayloadError` naming ``what``, the path and the problem unless
    ``value`` is JSON every store can carry: no lone surrogate in text, no int
    past Python's digit limit, no NaN or infinity, str keys, at most
    ``max_depth`` levels of nesting."""
    if _fine(value, max_depth, _INT_BITS):
        return
    problem = _find_problem(value, what, max_depth)
    if problem is not None:
        raise PayloadError(problem)


def _fine(value: object, depth: int, int_bits: int) -> bool:
    """The hot path of :func:`check_json`: plain types only, no paths built.

    False means "look closer": :func:`_find_problem` then names the problem, or
    finds none (a subclass of a JSON type, a large int within the digit limit).
    """
    kind = type(value)
    if kind is list or kind is tuple:
        return depth > 0 and _all_fine(value, depth - 1, int_bits)  # type: ignore[arg-type]
    if kind is dict:
        if depth <= 0:
            return False
        for key in value:  # type: ignore[attr-defined]
            if type(key) is not str or not (key.isascii() or _utf8(key)):
                return False
        return _all_fine(value.values(), depth - 1, int_bits)  # type: ignore[attr-defined]
    return _all_fine((value,), depth, int_bits)


def _all_fine(items: Iterable[object], depth: int, int_bits: int) -> bool:
    """:func:`_fine` for each of ``items``, the scalars checked here without a call
    each (a history event is one object of scalars; this runs for every value)."""
    for item in items:
        kind = type(item)
        if kind is str:
            if not (item.isascii() or _utf8(item)):  # type: ignore[attr-defined,arg-type]
                return False
        elif kind is int:
            if int_bits >= 0 and item.bit_length() > int_bits:  # type: ignore[attr-defined]
                return False
        elif kind is float:
            if not math.isfinite(item):  # type: ignore[arg-type]
                return False
        elif kind is list or kind is tuple or kind is dict:
            if not _fine(item, depth, int_bits):
                return False
        elif item is not None and kind is not bool:
            return False
    return True


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def encode(value: object, what: str, *, max_depth: int = STORED_DEPTH) -> str:
    """The JSON text of ``value``, checked as :func:`check_json` does.

    Raises:
        PayloadError: the value is not JSON a store can carry (the message names
            ``what``, the path inside it and the problem).
    """
    check_json(value, what, max_depth=max_depth)
    try:
        return _ENCODER.encode(value)
    except (ValueError, TypeError, RecursionError) as exc:  # an odd subclass, say
        raise PayloadError(f"{what} cannot be encoded as JSON: {exc}") from None


def plain(value: object, what: str, *, max_depth: int = MAX_DEPTH) -> Any:
    """The decoded JSON copy of ``value``: what a store hands back, and what replay sees.

    Raises:
        PayloadError: as :func:`check_json`.
    """
    kind = type(value)
    scalar = kind is int or kind is str or kind is float or kind is bool or value is None
    if scalar and _all_fine((value,), 0, _INT_BITS):
        return value  # immutable, and what its JSON text decodes to
    return json.loads(encode(value, what, max_depth=max_depth))


def _find_problem(value: object, path: str, depth: int) -> str | None:
    """Walk ``value`` at most ``depth`` container levels down; describe its first problem."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, str):
        return None if value.isascii() else _text_problem(value, path, "contains")
    if isinstance(value, int):
        return _int_problem(value, path)
    if isinstance(value, float):
        if math.isfinite(value):
            return None
        return f"{path} is the float {value!r}, which JSON cannot carry"
    if isinstance(value, list | tuple | dict) and depth <= 0:
        where = path if len(path) < 120 else f"{path[:100]}...{path[-12:]}"
        return f"{where} nests lists and objects too deeply (the limit is {MAX_DEPTH} levels)"
    if isinstance(value, list | tuple):
        for index, item in enumerate(value):
            problem = _find_problem(item, f"{path}[{index}]", depth - 1)
            if problem:
                return problem
        return None
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                return f"{path} has the key {key!r} of type {type(key).__name__}; JSON keys are str"
            if not key.isascii():
                problem = _text_problem(key, f"{path} has the key {key!r}, which", "contains")
                if problem:
                    return problem
            problem = _find_problem(item, f"{path}[{key!r}]", depth - 1)
            if problem:
                return problem
        return None
    return (
        f"{path} has type {type(value).__module__}.{type(value).__qualname__}, which is not JSON; "
        "pass dict, list, str, int, float, bool or None"
    )


def _text_problem(text: str, path: str, verb: str) -> str | None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return (
            f"{path} {verb} the lone surrogate {text[exc.start]!r} at index {exc.start}, "
            "which is not valid Unicode and cannot be stored (decode the text with "
            "errors='replace', or fix its source)"
        )
    return None


def _int_problem(value: int, path: str) -> str | None:
    if value.bit_length() <= _INT_BITS:
        return None
    try:
        int.__repr__(value)  # Python's digit limit (4,300 by default) applies here
    except ValueError as exc:
        return f"{path} is an int too long to write as JSON text ({exc}); pass it as a str"
    return None


def safe_text(text: str) -> str:
    """``text`` with any lone surrogate written as a ``\\udXXX`` escape: for messages
    the engine itself records (errors, reasons), which must always be storable."""
    if text.isascii() or _utf8(text):
        return text
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def dumps(value: object) -> str:
    """Compact, deterministic JSON text of a trusted document (the engine's own records).

    Values that come from user code go through :func:`encode` instead.
    """
    return _ENCODER.encode(value)


def loads(text: str | bytes) -> Any:
    return json.loads(text)


MAX_MESSAGE_BYTES = 256 * 1024


def check_message_payload(payload: object, what: str) -> int:
    """Check a message or event payload: JSON and at most 256 KiB encoded.

    Returns its encoded size.

    Raises:
        PayloadError: not JSON.
        PayloadTooLargeError: over the limit.
    """
    return _message_text(payload, what)[1]


def message_payload(payload: object, what: str) -> Any:
    """The decoded copy of a message or event payload, checked as
    :func:`check_message_payload` does."""
    return json.loads(_message_text(payload, what)[0])


def _message_text(payload: object, what: str) -> tuple[str, int]:
    text = encode(payload, what, max_depth=MAX_DEPTH)
    size = len(text.encode("utf-8"))
    if size > MAX_MESSAGE_BYTES:
        raise PayloadTooLargeError(
            f"{what} is {size:,} bytes as JSON; the limit is {MAX_MESSAGE_BYTES:,} bytes (256 KiB)"
        )
    return text, size
