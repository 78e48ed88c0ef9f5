"""Cassettes: recorded model answers, replayed in tests with nothing sent off the machine.

With ``KEEPGOING_GATEWAY_CASSETTE=path`` every call is keyed by the SHA-256 of
(model asked, messages, the other parameters). The mode is
``KEEPGOING_GATEWAY_CASSETTE_MODE``: ``replay`` (the default when the file
exists) answers from the file only, and a call it has no recording of is a
:class:`~keepgoing.errors.CassetteMissError`; ``record`` (the default when it
does not) calls the providers and writes each answer to the file.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from pathlib import Path
from typing import Any

from keepgoing.errors import CassetteMissError, ConfigurationError

__all__ = ["CASSETTE_ENV", "MODE_ENV", "Cassette", "cassette_key"]

CASSETTE_ENV = "KEEPGOING_GATEWAY_CASSETTE"
MODE_ENV = "KEEPGOING_GATEWAY_CASSETTE_MODE"


def cassette_key(operation: str, model: str, body: dict[str, Any], stream: bool) -> str:
    params = {k: v for k, v in body.items() if k not in ("messages", "input")}
    text = json.dumps(
        {
            "operation": operation,
            "model": model,
            "messages": body.get("messages", body.get("input")),
            "params": params,
            "stream": stream,
        },
        sort_keys=True,
        separators=(",", ":"),
    )
    return hashlib.sha256(text.encode()).hexdigest()


class Cassette:
    def __init__(self, path: Path, mode: str) -> None:
        if mode not in ("replay", "record"):
            raise ConfigurationError(f"{MODE_ENV} must be replay or record, not {mode!r}")
        self.path = path
        self.mode = mode
        self._lock = threading.Lock()
        self._entries: dict[str, Any] = {}
        if path.exists():
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
                self._entries = dict(data["entries"])
            except (OSError, ValueError, KeyError, TypeError) as exc:
                raise ConfigurationError(f"cassette {path} cannot be read: {exc}") from None
        elif mode == "replay":
            raise ConfigurationError(f"cassette {path} does not exist (mode replay)")

    @classmethod
    def from_env(cls) -> Cassette | None:
        where = os.environ.get(CASSETTE_ENV)
        if not where:
            return None
        path = Path(where)
        mode = os.environ.get(MODE_ENV) or ("replay" if path.exists() else "record")
        return cls(path, mode)

    @property
    def replaying(self) -> bool:
        return self.mode == "replay"

    def lookup(self, key: str, model: str) -> dict[str, Any]:
        """The recording of ``key``.

        Raises:
            CassetteMissError: none (the message says how to record it).
        """
        entry = self._entries.get(key)
        if entry is None:
            raise CassetteMissError(
                f"cassette {self.path} has no recording of this call to {model!r} "
                f"(key {key[:16]}); record it with {MODE_ENV}=record"
            )
        return dict(entry)

    def record(self, key: str, entry: dict[str, Any]) -> None:
        with self._lock:
            self._entries[key] = entry
            temporary = self.path.with_name(self.path.name + ".tmp")
            temporary.write_text(
                json.dumps({"version": 1, "entries": self._entries}, indent=1),
                encoding="utf-8",
            )
            os.replace(temporary, self.path)
