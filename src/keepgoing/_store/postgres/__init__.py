"""The PostgreSQL store: the store, the pool, the group writer, LISTEN, liveness locks,
the SQL translation and its migrations."""

from keepgoing._store.postgres.store import (
    PostgresOptions,
    PostgresStore,
    connect_error,
    migrate,
    parse_postgres_url,
)

__all__ = ["PostgresOptions", "PostgresStore", "connect_error", "migrate", "parse_postgres_url"]
