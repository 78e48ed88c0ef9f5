"""Opening a store by its URL: the one place that knows both stores.

:mod:`keepgoing._store.url` reads the URL (:func:`~keepgoing._store.url.parse_store_url`);
this module builds the store it names. It sits above ``_store`` so that
neither store imports the other's opener, and the store package has no
import that runs back into itself.
"""

from __future__ import annotations

from keepgoing._store.protocol import Store
from keepgoing._store.url import parse_store_url
from keepgoing.errors import InvalidStoreURLError

__all__ = ["store_from_url"]


def store_from_url(url: str | None = None) -> Store:
    """Build (not open) the store a URL names.

    Raises:
        InvalidStoreURLError: the URL is not one of the accepted forms.
    """
    parsed = parse_store_url(url)
    if parsed.kind == "postgresql":
        return _postgres(parsed.text)
    from keepgoing._store.sqlite import SqliteStore  # noqa: PLC0415

    assert parsed.path is not None
    if parsed.path == ":memory:":
        return SqliteStore(":memory:", url=parsed.text)
    return SqliteStore(parsed.path, synchronous=parsed.synchronous, url=parsed.text)


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
