"""Server defaults, importable without loading the web stack (the CLI's help uses them)."""

from __future__ import annotations

__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_LONG_POLL_MAX",
    "DEFAULT_MAX_BODY",
    "DEFAULT_PORT",
    "DEFAULT_SESSION_IDLE",
    "DEFAULT_SESSION_LIFETIME",
    "DEFAULT_STREAM_MAX",
]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8711
#: The largest request body the server reads (a message payload is capped at 256 KiB).
DEFAULT_MAX_BODY = 1024 * 1024
#: The longest a result long poll waits, in seconds.
DEFAULT_LONG_POLL_MAX = 30.0
#: The longest an event stream stays open, in seconds (an EventSource reconnects).
DEFAULT_STREAM_MAX = 600.0
#: A UI session ends after this many seconds without a request ...
DEFAULT_SESSION_IDLE = 2 * 3600.0
#: ... and this many seconds after signing in, however it is used.
DEFAULT_SESSION_LIFETIME = 12 * 3600.0
