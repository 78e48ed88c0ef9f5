"""Store URLs, one spelling everywhere (``KEEPGOING_STORE``, ``--store``, ``Client(store=)``).

Accepted forms::

    sqlite:///relative/path.db        relative to the working directory
    sqlite:////absolute/path.db
    sqlite:///path.db?synchronous=normal
    sqlite://   or   memory://        SQLite in memory, this store object only
    postgresql://user@host:5432/db    PostgreSQL, shared by many machines
    postgresql://...?pool_max=16      pool_min, pool_max, outage_timeout; libpq parameters

With no URL and no ``KEEPGOING_STORE``, the store is the project's: the
``.keepgoing/`` folder of the working directory or of its nearest parent that has
one (as git finds ``.git``), holding ``keepgoing.db``; when no folder up to the
root has one, it is made in the working directory. So a script run from a
subfolder opens the same store as one run at the project's top.

This module only reads and spells URLs; opening the store a URL names is
``keepgoing._open_store.store_from_url``, above both stores.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Literal, NamedTuple
from urllib.parse import parse_qs, urlsplit, urlunsplit

from keepgoing.errors import InvalidStoreURLError

__all__ = [
    "DEFAULT_STORE_URL",
    "PROJECT_FOLDER",
    "default_store_url",
    "project_folder",
    "StoreURL",
    "parse_store_url",
    "redact_url",
    "resolve_store_url",
]

#: The folder that marks a project's store (and holds its background orchestrator's files).
PROJECT_FOLDER = ".keepgoing"
#: The default store, relative to the project folder's parent.
DEFAULT_STORE_URL = f"sqlite:///{PROJECT_FOLDER}/keepgoing.db"
_FORMS = (
    "sqlite:///relative.db, sqlite:////absolute/path.db, sqlite:///x.db?synchronous=normal, "
    "sqlite:// or memory:// (in memory), postgresql://user@host:port/db"
)


def project_folder(start: str | os.PathLike[str] | None = None) -> Path:
    """The project's ``.keepgoing/`` folder, absolute: in ``start`` (default: the working
    directory) or its nearest parent that has one; else ``start/.keepgoing`` (not made
    here: the store makes it when it opens)."""
    here = Path(os.path.abspath(start if start is not None else os.getcwd()))
    for folder in (here, *here.parents):
        candidate = folder / PROJECT_FOLDER
        if candidate.is_dir():
            return candidate
    return here / PROJECT_FOLDER


def default_store_url(start: str | os.PathLike[str] | None = None) -> str:
    """The project's store: ``keepgoing.db`` in :func:`project_folder`, as an absolute URL."""
    return f"sqlite:///{project_folder(start) / 'keepgoing.db'}"


def resolve_store_url(url: str | None = None) -> str:
    """``url``, else ``KEEPGOING_STORE``, else the project's SQLite file
    (:func:`default_store_url`)."""
    return url or os.environ.get("KEEPGOING_STORE") or default_store_url()


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


class StoreURL(NamedTuple):
    """A store URL, checked: which store it names and that store's options."""

    kind: Literal["sqlite", "postgresql"]
    #: The URL as given (resolved from the environment when none was).
    text: str
    #: SQLite's file (``:memory:`` in memory); None for PostgreSQL.
    path: str | None = None
    #: SQLite's ``synchronous`` option.
    synchronous: str = "full"


def parse_store_url(url: str | None = None) -> StoreURL:
    """Check the URL (or ``KEEPGOING_STORE``, or the project's store) and say what it names.

    Raises:
        InvalidStoreURLError: the URL is not one of the accepted forms.
    """
    text = resolve_store_url(url)
    if not isinstance(text, str):
        raise InvalidStoreURLError(f"a store URL must be a string, not {type(text).__name__}")
    if text in ("memory://", "sqlite://", "sqlite:///:memory:"):
        # ``memory://`` is another spelling of ``sqlite://``: SQLite in memory.
        return StoreURL("sqlite", text, ":memory:")
    if text.startswith("sqlite:///"):
        return _sqlite(text)
    if text.startswith(("postgresql://", "postgres://")):
        return StoreURL("postgresql", text)
    raise InvalidStoreURLError(f"{text!r} is not a store URL; use one of: {_FORMS}")


def _sqlite(text: str) -> StoreURL:
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
    return StoreURL("sqlite", text, path, synchronous)
