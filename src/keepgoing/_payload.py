"""JSON payloads: checked at the call site, so bad input never reaches a worker."""

from __future__ import annotations

import json
import math
from typing import Any

from keepgoing.errors import PayloadError, PayloadTooLargeError

__all__ = ["JSON", "MAX_MESSAGE_BYTES", "check_json", "check_message_payload", "dumps", "loads"]

JSON = Any  # a value made only of dict[str, ...], list, str, int, float, bool and None


def check_json(value: object, what: str) -> None:
    """Raise :class:`PayloadError` naming ``what`` and the bad type unless ``value`` is JSON."""
    problem = _find_problem(value, what)
    if problem is not None:
        raise PayloadError(problem)


def _find_problem(value: object, path: str) -> str | None:
    if value is None or isinstance(value, bool | int | str):
        return None
    if isinstance(value, float):
        if math.isfinite(value):
            return None
        return f"{path} is the float {value!r}, which JSON cannot carry"
    if isinstance(value, list | tuple):
        for index, item in enumerate(value):
            problem = _find_problem(item, f"{path}[{index}]")
            if problem:
                return problem
        return None
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                return f"{path} has the key {key!r} of type {type(key).__name__}; JSON keys are str"
            problem = _find_problem(item, f"{path}[{key!r}]")
            if problem:
                return problem
        return None
    return (
        f"{path} has type {type(value).__module__}.{type(value).__qualname__}, which is not JSON; "
        "pass dict, list, str, int, float, bool or None"
    )


_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def dumps(value: object) -> str:
    """Compact, deterministic JSON text."""
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
    check_json(payload, what)
    size = len(dumps(payload).encode("utf-8"))
    if size > MAX_MESSAGE_BYTES:
        raise PayloadTooLargeError(
            f"{what} is {size:,} bytes as JSON; the limit is {MAX_MESSAGE_BYTES:,} bytes (256 KiB)"
        )
    return size
