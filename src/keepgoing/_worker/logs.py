"""Logs per attempt: what a task prints and logs, captured for its attempt alone.

:func:`install` puts a router in front of ``sys.stdout`` and ``sys.stderr`` and a
handler on the root logger, once per process. Each write goes to the original
stream as before and, when the writing code runs inside an attempt (the
:data:`current` context variable, which a sync body's thread inherits through
``contextvars.copy_context``), to that attempt's :class:`Capture` as well. Two
attempts running at once, in threads or as coroutines, never see each other's
lines: routing is by context, not by redirecting the process's streams.

Each capture keeps at most ``limit`` bytes of UTF-8 (64 KiB) and counts the
rest, which :meth:`Capture.finish` replaces with a marker line. Text that is not
valid Unicode (lone surrogates from undecodable bytes, bytes written to
``sys.stdout.buffer``) is kept with U+FFFD in its place; NUL becomes U+FFFD too,
since PostgreSQL cannot store it. Secret values are redacted when the capture
finishes: the values of the environment variables named in
``KEEPGOING_SECRET_ENV`` (a comma list) and every value given to
:func:`register_secret`.

Not captured: writes that bypass ``sys.stdout`` (``os.write(1, ...)``, child
processes), threads a task starts itself (they do not inherit its context),
and records of loggers below their effective level. A task that closes
``sys.stdout`` closes nothing (the router ignores it); one that replaces
``sys.stdout`` is routed again at the next attempt.
"""

from __future__ import annotations

import contextlib
import contextvars
import io
import logging
import os
import sys
import threading
from typing import Any, TextIO

__all__ = [
    "LIMIT",
    "Capture",
    "current",
    "install",
    "register_secret",
    "secret_values",
]

#: The most of an attempt's output that is kept, in bytes of UTF-8.
LIMIT = 64 * 1024
_MIN_SECRET = 4  # shorter values would redact ordinary words
_REDACTED = "[redacted]"

current: contextvars.ContextVar[Capture | None] = contextvars.ContextVar(
    "keepgoing_log_capture", default=None
)

_secrets: set[str] = set()
_secrets_lock = threading.Lock()


def register_secret(value: str) -> None:
    """Redact ``value`` from every attempt log this process stores from now on
    (values shorter than 4 characters are ignored: they would redact ordinary text)."""
    if not isinstance(value, str):
        raise TypeError(f"a secret is text, not {type(value).__name__}")
    if len(value) >= _MIN_SECRET:
        with _secrets_lock:
            _secrets.add(value)


def secret_values() -> list[str]:
    """Every value to redact: registered ones and those of ``KEEPGOING_SECRET_ENV``'s
    variables, longest first (so a secret that contains another is redacted whole)."""
    names = [n.strip() for n in os.environ.get("KEEPGOING_SECRET_ENV", "").split(",")]
    found = {os.environ.get(n, "") for n in names if n}
    with _secrets_lock:
        found |= _secrets
    return sorted((v for v in found if len(v) >= _MIN_SECRET), key=len, reverse=True)


def _clean(text: str) -> str:
    if "\x00" in text:
        text = text.replace("\x00", "\ufffd")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates (surrogateescape'd bytes, say)
        text = text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    return text


class Capture:
    """One attempt's output: at most ``limit`` bytes kept, every byte counted."""

    def __init__(self, limit: int = LIMIT) -> None:
        self.limit = limit
        self.size = 0
        self._parts: list[str] = []
        self._kept = 0
        self._slack = 4096  # kept past the limit, so a secret across it is still found
        self._lock = threading.Lock()

    def write(self, text: str) -> None:
        if not text:
            return
        size = len(text.encode("utf-8", "surrogatepass"))
        with self._lock:
            self.size += size
            room = self.limit + self._slack - self._kept
            if room <= 0:
                return
            if size > room:
                text = text[:room]
                size = len(text.encode("utf-8", "surrogatepass"))
            self._parts.append(text)
            self._kept += size

    def finish(self) -> tuple[str, int, bool]:
        """``(text, size, truncated)``: redacted, cut to the limit with a marker."""
        with self._lock:
            text = _clean("".join(self._parts))
            size = self.size
        for secret in secret_values():
            text = text.replace(secret, _REDACTED)
        data = text.encode("utf-8")
        truncated = size > self.limit or len(data) > self.limit
        if truncated:
            kept = data[: self.limit].decode("utf-8", "ignore")
            dropped = max(0, size - len(kept.encode("utf-8")))
            newline = "" if kept.endswith("\n") or not kept else "\n"
            text = (
                f"{kept}{newline}[keepgoing: {dropped:,} more bytes not kept; an attempt's log "
                f"is cut at {self.limit // 1024} KiB]\n"
            )
        return text, size, truncated


class _Router(io.TextIOBase):
    """``sys.stdout``/``sys.stderr``: writes go to the original stream and, inside an
    attempt, to its capture."""

    def __init__(self, original: TextIO) -> None:
        self.original = original

    def write(self, text: str) -> int:
        capture = current.get()
        if capture is not None:
            capture.write(text)
        try:
            return self.original.write(text)
        except (ValueError, OSError, UnicodeEncodeError):
            return len(text)  # the original is closed or cannot encode it: keep going

    def flush(self) -> None:
        with contextlib.suppress(ValueError, OSError):
            self.original.flush()

    def close(self) -> None:
        """A task that closes ``sys.stdout`` must not close the worker's own stream."""

    @property
    def closed(self) -> bool:
        return False

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        try:
            return self.original.isatty()
        except (ValueError, OSError):
            return False

    def fileno(self) -> int:
        return self.original.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.original, "encoding", "utf-8") or "utf-8"

    @property
    def buffer(self) -> _BinaryRouter:
        return _BinaryRouter(self)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.original, name)


class _BinaryRouter(io.RawIOBase):
    """``sys.stdout.buffer``: bytes are decoded (invalid UTF-8 as U+FFFD) for the capture."""

    def __init__(self, text: _Router) -> None:
        self._text = text

    def write(self, data: Any) -> int:
        raw = bytes(data)
        capture = current.get()
        if capture is not None:
            capture.write(raw.decode("utf-8", "replace"))
        target = getattr(self._text.original, "buffer", None)
        try:
            if target is not None:
                target.write(raw)
        except (ValueError, OSError):
            pass
        return len(raw)

    def writable(self) -> bool:
        return True

    def close(self) -> None:
        """Never closes the worker's stream."""

    def flush(self) -> None:
        target = getattr(self._text.original, "buffer", None)
        if target is not None:
            with contextlib.suppress(ValueError, OSError):
                target.flush()


class _Handler(logging.Handler):
    """Copies each record logged inside an attempt to its capture."""

    def __init__(self) -> None:
        super().__init__(logging.NOTSET)
        self.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        capture = current.get()
        if capture is None:
            return
        try:
            capture.write(self.format(record) + "\n")
        except Exception:  # a record that cannot be formatted is not the attempt's failure
            capture.write(f"{record.levelname} {record.name}: {record.msg!r}\n")


_handler = _Handler()
_install_lock = threading.Lock()


def install() -> None:
    """Route ``sys.stdout``, ``sys.stderr`` and the root logger through captures
    (again, if a task replaced a stream). Idempotent and cheap."""
    with _install_lock:
        for name in ("stdout", "stderr"):
            stream = getattr(sys, name)
            if not isinstance(stream, _Router) and stream is not None:
                setattr(sys, name, _Router(stream))
        root = logging.getLogger()
        if _handler not in root.handlers:
            root.addHandler(_handler)
