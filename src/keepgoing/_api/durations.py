"""Durations: ``"30s"``, ``"1h30m"``, ``"250ms"``, a ``timedelta``, or int seconds."""

from __future__ import annotations

import math
import re
from datetime import timedelta

from keepgoing.errors import InvalidDurationError

__all__ = ["Duration", "parse_duration"]

Duration = str | int | float | timedelta

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_ACCEPTED = 'a string such as "30s", "1h30m" or "250ms", a timedelta, or int seconds'


def parse_duration(value: object, *, what: str = "duration") -> float:
    """Return ``value`` as a non-negative number of seconds.

    Raises:
        InvalidDurationError: on anything that is not a duration, naming ``what``.
    """
    if isinstance(value, bool):
        raise InvalidDurationError(f"{what} must be {_ACCEPTED}, not the bool {value!r}")
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str):
        seconds = _parse_text(value, what)
    else:
        raise InvalidDurationError(
            f"{what} must be {_ACCEPTED}, not {type(value).__name__} {value!r}"
        )
    if math.isnan(seconds) or math.isinf(seconds) or seconds < 0:
        raise InvalidDurationError(f"{what} must be a finite, non-negative duration, not {value!r}")
    return seconds


def _parse_text(text: str, what: str) -> float:
    compact = text.strip().replace(" ", "")
    if compact and compact.isdigit():
        return float(compact)
    pos, total, seen = 0, 0.0, False
    for match in _PART.finditer(compact):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNITS[match.group(2)]
        pos, seen = match.end(), True
    if not seen or pos != len(compact):
        raise InvalidDurationError(f"{what} {text!r} is not a duration; use {_ACCEPTED}")
    return total
