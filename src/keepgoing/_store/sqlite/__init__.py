"""The SQLite store: the store, its group-commit thread, opening the file, its migrations."""

from keepgoing._store.sqlite.store import SqliteStore

__all__ = ["SqliteStore"]
