"""Durations: ``"30s"``, ``"1h30m"``, ``"250ms"``, a ``timedelta``, or int seconds."""

from __future__ import annotations

import math
import re
from datetime import timedelta

from keepgoing.errors import InvalidDurationError

__all__ = ["Duration", "parse_duration"]

Duration = str | int | float | timedelta

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ms|s|m|h|d)")
_ORDER = ("d", "h", "m", "s", "ms")
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
        try:
            seconds = float(value)
        except OverflowError:
            raise InvalidDurationError(f"{what} {value!r} is too large") from None
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
    if compact and compact.isascii() and compact.isdigit():
        return float(compact)
    pos, total, last = 0, 0.0, -1
    for match in _PART.finditer(compact):
        rank = _ORDER.index(match.group(2))
        if match.start() != pos or rank <= last:  # gaps, or units repeated or out of order
            break
        total += float(match.group(1)) * _UNITS[match.group(2)]
        pos, last = match.end(), rank
    if last < 0 or pos != len(compact):
        raise InvalidDurationError(f"{what} {text!r} is not a duration; use {_ACCEPTED}")
    return total
