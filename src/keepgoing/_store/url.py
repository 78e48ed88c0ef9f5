"""Store URLs, one spelling everywhere (``KEEPGOING_STORE``, ``--store``, ``Client(store=)``).

Accepted forms::

    sqlite:///relative/path.db        relative to the working directory
    sqlite:////absolute/path.db
    sqlite:///path.db?synchronous=normal
    sqlite://   or   memory://        in memory, this process only
"""

from __future__ import annotations

import os
from urllib.parse import parse_qs

from keepgoing._store.protocol import Store
from keepgoing.errors import InvalidStoreURLError

__all__ = ["DEFAULT_STORE_URL", "resolve_store_url", "store_from_url"]

DEFAULT_STORE_URL = "sqlite:///.keepgoing/keepgoing.db"
_FORMS = (
    "sqlite:///relative.db, sqlite:////absolute/path.db, sqlite:///x.db?synchronous=normal, "
    "sqlite:// or memory:// (in memory)"
)


def resolve_store_url(url: str | None = None) -> str:
    """``url``, else ``KEEPGOING_STORE``, else the default SQLite file."""
    return url or os.environ.get("KEEPGOING_STORE") or DEFAULT_STORE_URL


def store_from_url(url: str | None = None) -> Store:
    """Build (not open) the store a URL names.

    Raises:
        InvalidStoreURLError: the URL is not one of the accepted forms.
    """
    text = resolve_store_url(url)
    if not isinstance(text, str):
        raise InvalidStoreURLError(f"a store URL must be a string, not {type(text).__name__}")
    if text in ("memory://", "sqlite://", "sqlite:///:memory:"):
        if text == "memory://":
            from keepgoing._store.memory import MemoryStore  # noqa: PLC0415

            return MemoryStore()
        from keepgoing._store.sqlite import SqliteStore  # noqa: PLC0415

        return SqliteStore(":memory:", url=text)
    if text.startswith("sqlite:///"):
        return _sqlite(text)
    if text.startswith(("postgresql://", "postgres://")):
        raise InvalidStoreURLError(
            f"{text!r}: PostgreSQL stores are not available in this version; use one of: {_FORMS}"
        )
    raise InvalidStoreURLError(f"{text!r} is not a store URL; use one of: {_FORMS}")


def _sqlite(text: str) -> Store:
    from keepgoing._store.sqlite import SqliteStore  # noqa: PLC0415

    rest = text[len("sqlite:///") :]
    path, _, query = rest.partition("?")
    if not path:
        raise InvalidStoreURLError(f"{text!r} names no file; use one of: {_FORMS}")
    options = parse_qs(query, keep_blank_values=True)
    unknown = sorted(set(options) - {"synchronous"})
    if unknown:
        raise InvalidStoreURLError(f"{text!r}: unknown option(s) {unknown}; known: synchronous")
    synchronous = options.get("synchronous", ["full"])[-1].lower()
    if synchronous not in ("full", "normal"):
        raise InvalidStoreURLError(
            f"{text!r}: synchronous must be 'full' or 'normal', not {synchronous!r}"
        )
    return SqliteStore(path, synchronous=synchronous, url=text)
