"""Server defaults, importable without loading the web stack (the CLI's help uses them)."""

from __future__ import annotations

__all__ = ["DEFAULT_HOST", "DEFAULT_MAX_BODY", "DEFAULT_PORT"]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8711
#: The largest request body the server reads (a message payload is capped at 256 KiB).
DEFAULT_MAX_BODY = 1024 * 1024
