"""Store URLs, one spelling everywhere (``KEEPGOING_STORE``, ``--store``, ``Client(store=)``).

Accepted forms::

    sqlite:///relative/path.db        relative to the working directory
    sqlite:////absolute/path.db
    sqlite:///path.db?synchronous=normal
    sqlite://   or   memory://        SQLite in memory, this store object only
    postgresql://user@host:5432/db    PostgreSQL, shared by many machines
    postgresql://...?pool_max=16      pool_min, pool_max, outage_timeout; libpq parameters
"""

from __future__ import annotations

import os
import re
from urllib.parse import parse_qs, urlsplit, urlunsplit

from keepgoing._store.protocol import Store
from keepgoing.errors import InvalidStoreURLError

__all__ = ["DEFAULT_STORE_URL", "redact_url", "resolve_store_url", "store_from_url"]

DEFAULT_STORE_URL = "sqlite:///.keepgoing/keepgoing.db"
_FORMS = (
    "sqlite:///relative.db, sqlite:////absolute/path.db, sqlite:///x.db?synchronous=normal, "
    "sqlite:// or memory:// (in memory), postgresql://user@host:port/db"
)


def resolve_store_url(url: str | None = None) -> str:
    """``url``, else ``KEEPGOING_STORE``, else the default SQLite file."""
    return url or os.environ.get("KEEPGOING_STORE") or DEFAULT_STORE_URL


def redact_url(url: str) -> str:
    """``url`` with its password, if any, replaced by ``***`` (for logs and messages):
    the one after the user name, and a ``password=`` query parameter."""
    parts = urlsplit(url)
    query = _QUERY_PASSWORD.sub(r"\1***", parts.query)
    if not parts.password and query == parts.query:
        return url  # unchanged (urlunsplit would also respell ``sqlite:///``)
    netloc = parts.netloc
    if parts.password:
        user = f"{parts.username}:***@" if parts.username else ":***@"
        netloc = user + netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=netloc, query=query))


_QUERY_PASSWORD = re.compile(r"((?:^|&)(?:password|sslpassword)=)[^&]*", re.IGNORECASE)


def store_from_url(url: str | None = None) -> Store:
    """Build (not open) the store a URL names.

    Raises:
        InvalidStoreURLError: the URL is not one of the accepted forms.
    """
    text = resolve_store_url(url)
    if not isinstance(text, str):
        raise InvalidStoreURLError(f"a store URL must be a string, not {type(text).__name__}")
    if text in ("memory://", "sqlite://", "sqlite:///:memory:"):
        # ``memory://`` is another spelling of ``sqlite://``: SQLite in memory.
        from keepgoing._store.sqlite import SqliteStore  # noqa: PLC0415

        return SqliteStore(":memory:", url=text)
    if text.startswith("sqlite:///"):
        return _sqlite(text)
    if text.startswith(("postgresql://", "postgres://")):
        return _postgres(text)
    raise InvalidStoreURLError(f"{text!r} is not a store URL; use one of: {_FORMS}")


def _postgres(text: str) -> Store:
    try:
        from keepgoing._store.postgres import PostgresStore  # noqa: PLC0415
    except ModuleNotFoundError as exc:
        if exc.name not in ("psycopg", "psycopg_pool"):
            raise
        raise InvalidStoreURLError(
            "PostgreSQL stores need psycopg: pip install 'keepgoing[postgres]'"
        ) from None
    return PostgresStore(text)


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
