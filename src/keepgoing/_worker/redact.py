"""Keeping a worker group's secrets out of what a worker records and logs.

A group backend that injects secrets names their environment variables in
``KEEPGOING_SECRET_ENV`` (comma-separated). The worker then replaces each of
those values with ``[secret NAME]`` in the error messages and tracebacks of
failed attempts (which go into history), in every log record it emits, and in
what it writes to stdout and stderr.
Values shorter than 4 characters are left alone: they would match everywhere.
"""

from __future__ import annotations

import logging
import os
import sys
from dataclasses import replace
from typing import Any, TextIO

from keepgoing._history.events import ErrorInfo

__all__ = [
    "install_log_redaction",
    "install_stream_redaction",
    "redact",
    "redact_error",
    "secret_values",
]

_MIN = 4


def secret_values() -> dict[str, str]:
    """value -> variable name, for each variable ``KEEPGOING_SECRET_ENV`` names."""
    names = [n.strip() for n in os.environ.get("KEEPGOING_SECRET_ENV", "").split(",")]
    found = {os.environ[n]: n for n in names if n and len(os.environ.get(n, "")) >= _MIN}
    return dict(sorted(found.items(), key=lambda kv: -len(kv[0])))  # longest first


def redact(text: str, values: dict[str, str] | None = None) -> str:
    for value, name in (secret_values() if values is None else values).items():
        if value in text:
            text = text.replace(value, f"[secret {name}]")
    return text


def redact_error(error: ErrorInfo) -> ErrorInfo:
    values = secret_values()
    if not values:
        return error
    return replace(
        error,
        message=redact(error.message, values),
        traceback=None if error.traceback is None else redact(error.traceback, values),
    )


class _Redacting(logging.Filter):
    def __init__(self, values: dict[str, str]) -> None:
        super().__init__()
        self.values = values

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redact(message, self.values)
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text, self.values)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        return True


def install_log_redaction() -> None:
    """Redact secret values from every record the root logger's handlers emit."""
    values = secret_values()
    if not values:
        return
    for handler in logging.getLogger().handlers:
        handler.addFilter(_Redacting(values))


class _RedactingStream:
    """A text stream that redacts secret values in each write (a value split across two
    writes is not caught: task output is the user's own; keep secrets out of it)."""

    def __init__(self, inner: TextIO, values: dict[str, str]) -> None:
        self._inner = inner
        self._values = values

    def write(self, text: str) -> int:
        self._inner.write(redact(text, self._values))
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def install_stream_redaction() -> None:
    """Redact secret values from what this process writes to stdout and stderr."""
    values = secret_values()
    if not values:
        return
    sys.stdout = _RedactingStream(sys.stdout, values)
    sys.stderr = _RedactingStream(sys.stderr, values)
