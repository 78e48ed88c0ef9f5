"""The worker role on PostgreSQL: a login that can run workflows and nothing more.

:func:`grant_worker_role` creates the role if it does not exist (with a
password, or none for trust or certificate authentication) and runs
``worker_role.sql``, whose header lists what it grants and what it leaves out.
Replicas are given the role's URL (``KEEPGOING_WORKER_STORE`` on the server),
so the code a deploy runs can read and write runs but can neither mint a token,
read a secret nor write the audit log. Run it again after an upgrade that adds
tables (it only grants).
"""

from __future__ import annotations

import re
from importlib import resources
from typing import Any

import psycopg
from psycopg import sql

from keepgoing._store.postgres.store import migrate, parse_postgres_url
from keepgoing.errors import ConfigurationError, StoreError

__all__ = ["grant_worker_role", "worker_role_sql"]

_ROLE = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def worker_role_sql() -> str:
    """The grants, with ``{role}`` and ``{schema}`` left to fill in."""
    return resources.files("keepgoing._store.postgres").joinpath("worker_role.sql").read_text()


def _statements(text: str) -> list[str]:
    body = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("--"))
    return [s.strip() for s in body.split(";") if s.strip()]


def grant_worker_role(url: str, role: str, *, password: str | None = None) -> None:
    """Create ``role`` (a login) if it is missing and grant it the worker's tables.

    ``url`` is an owner's URL of the store (it migrates the schema first).

    Raises:
        ConfigurationError: ``role`` is not a plain lower-case name.
        StoreError: the database refused (the URL's role may not create roles or grant).
    """
    if not _ROLE.match(role):
        raise ConfigurationError(
            f"a worker role is a lower-case letter or '_' then up to 62 letters, digits or "
            f"'_', not {role!r}"
        )
    conninfo, _, where = parse_postgres_url(url)
    migrate(conninfo, where)
    try:
        with psycopg.connect(conninfo) as conn:
            _grant(conn, role, password)
    except psycopg.Error as exc:
        raise StoreError(f"PostgreSQL at {where} refused the worker role's grants: {exc}") from None


def _grant(conn: psycopg.Connection[Any], role: str, password: str | None) -> None:
    name = sql.Identifier(role)
    exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone()
    if exists is None:
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(name))
    if password is not None:
        conn.execute(sql.SQL("ALTER ROLE {} PASSWORD {}").format(name, sql.Literal(password)))
    row = conn.execute("SELECT current_database(), current_schema()").fetchone()
    assert row is not None
    database, schema = row
    conn.execute(
        sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(sql.Identifier(database), name)
    )
    for statement in _statements(worker_role_sql()):
        text = statement.replace("{role}", "{r}").replace("{schema}", "{s}")
        conn.execute(sql.SQL(text).format(r=name, s=sql.Identifier(schema)))
