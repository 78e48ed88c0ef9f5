"""The store for many machines: one PostgreSQL database shared by every worker and server.

``KEEPGOING_STORE=postgresql://user@host:5432/db`` points workers, servers
and clients at one database; each process opens a small connection pool and
one ``LISTEN`` connection. Servers keep no state of their own, so any number
of them (and of workers) can run the orchestrator duties at once: due
timers are fired and expired leases reaped with ``SKIP LOCKED``, and event
matching happens inside the publishing or waiting transaction, so no leader
is needed (see ``sql.dialect`` for the lock order that makes this safe).

How it is built: :class:`~keepgoing._store.sql.store.SqlStore` is the storage
base, shared with SQLite. It holds every query, as plain functions over a
connection, and every store method is one such function run as a read or a
write. This class supplies only what is PostgreSQL's own:

* the transport: pooled psycopg connections in threads
  (``postgres.pool``), one transaction per call, instead of SQLite's one
  thread with group commit;
* the SQL spellings, through :class:`~keepgoing._store.postgres.sql.PgConnection`;
* wake-ups: ``NOTIFY`` in the writing transaction and a ``LISTEN`` thread
  (``postgres.listen``) instead of the Unix-socket doorbell;
* migrations: ``_store/postgres/migrations``, applied under an advisory
  lock so that many processes starting at once migrate once.

URL options (removed before the rest goes to libpq): ``pool_min`` (1),
``pool_max`` (8) connections per process, and ``outage_timeout`` (30 s): how
long a call waits for a lost database to come back before it raises
:class:`~keepgoing.errors.StoreError`. Every libpq parameter is accepted
too (``sslmode``, ``connect_timeout``, ``application_name``, ...).
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from keepgoing._clock import system_clock
from keepgoing._store.doorbell import LocalBell
from keepgoing._store.migrate import Migration, check_version, load_migrations
from keepgoing._store.postgres.listen import Listener
from keepgoing._store.postgres.liveness import AdvisoryToken, advisory_states
from keepgoing._store.postgres.pool import Outage, PgRunner
from keepgoing._store.sql import rows
from keepgoing._store.sql.store import SqlStore
from keepgoing._store.startup import StoreUnavailableError, first_line
from keepgoing._store.url import redact_url
from keepgoing.errors import InvalidStoreURLError, StoreError

__all__ = ["PostgresOptions", "PostgresStore", "connect_error", "parse_postgres_url"]

#: libpq settings applied unless the URL sets them: fail fast on a dead host, and
#: notice a silently dropped connection in seconds instead of minutes.
LIBPQ_DEFAULTS = {
    "application_name": "keepgoing",
    "connect_timeout": "5",
    "keepalives": "1",
    "keepalives_idle": "10",
    "keepalives_interval": "3",
    "keepalives_count": "3",
    "tcp_user_timeout": "15000",
}
_MIGRATION_LOCK = 0x6B656570676F696E  # "keepgoin": one migrator at a time per database


class PostgresOptions:
    """The keepgoing options of a ``postgresql://`` URL."""

    def __init__(self, pool_min: int = 1, pool_max: int = 8, outage_timeout: float = 30.0) -> None:
        if pool_min < 0 or pool_max < 1 or pool_min > pool_max:
            raise ValueError(
                f"need 0 <= pool_min <= pool_max and pool_max >= 1, not {pool_min}, {pool_max}"
            )
        if outage_timeout <= 0:
            raise ValueError(f"outage_timeout must be positive, not {outage_timeout}")
        self.pool_min = pool_min
        self.pool_max = pool_max
        self.outage_timeout = outage_timeout


def parse_postgres_url(url: str) -> tuple[str, PostgresOptions, str]:
    """(libpq conninfo, keepgoing options, ``host:port/db`` for messages).

    Raises:
        InvalidStoreURLError: a malformed URL, option or libpq parameter.
    """
    parts = urlsplit(url)
    ours: dict[str, str] = {}
    theirs: list[tuple[str, str]] = []
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if key in _OPTIONS:
            ours[key] = value
        else:
            theirs.append((key, value))
    try:
        options = PostgresOptions(**{k: _OPTIONS[k](v) for k, v in ours.items()})
        libpq = urlunsplit(("postgresql", parts.netloc, parts.path, urlencode(theirs), ""))
        params = conninfo_to_dict(libpq)
    except (ValueError, psycopg.ProgrammingError) as exc:
        raise InvalidStoreURLError(f"{redact_url(url)!r}: {exc}") from None
    for key, value in LIBPQ_DEFAULTS.items():
        params.setdefault(key, value)
    host = str(params.get("host") or "localhost")
    database = params.get("dbname") or params.get("user") or ""
    where = f"{host}:{params.get('port') or 5432}/{database}"
    return make_conninfo("", **params), options, where


_OPTIONS: dict[str, Any] = {"pool_min": int, "pool_max": int, "outage_timeout": float}


class PostgresStore(SqlStore):
    """A :class:`~keepgoing._store.protocol.Store` on a PostgreSQL database (``postgresql://`` URL).

    Thread-safe and task-safe; one instance per process is enough.
    """

    def __init__(self, url: str) -> None:
        self.url = url
        self.conninfo, self.options, self.where = parse_postgres_url(url)
        self._token = uuid.uuid4().hex
        self._outage = Outage(self.where)
        self._local_bell = LocalBell()
        self._runner: PgRunner | None = None
        self._listener: Listener | None = None
        self._open_lock = threading.Lock()
        self._opened = False
        self._advisory: dict[str, AdvisoryToken] = {}

    # -- lifecycle -------------------------------------------------------------
    async def open(self) -> None:
        if not self._opened:
            await asyncio.get_running_loop().run_in_executor(None, self.open_sync)

    def try_open_sync(self) -> None:
        """One attempt to open (see :class:`~keepgoing._store.startup.Opening`).

        Raises:
            StoreUnavailableError: the database cannot be reached now; waiting may help.
            StoreError: it refused in a way waiting cannot fix (see :func:`migrate`).
        """
        self.open_sync()

    def open_sync(self) -> None:
        with self._open_lock:
            if self._opened:
                return
            migrate(self.conninfo, redact_url(self.url))
            runner = PgRunner(
                self.conninfo,
                where=self.where,
                min_size=self.options.pool_min,
                max_size=self.options.pool_max,
                outage_timeout=self.options.outage_timeout,
                on_commit=self._local_bell.ring,
                notify_payload=self._token,
                outage=self._outage,
            )
            try:
                runner.open()
            except StoreError as exc:  # the database went away again after migrating
                raise StoreUnavailableError(str(exc)) from exc
            listener = Listener(
                self.conninfo,
                ring=self._local_bell.ring,
                own_payload=self._token,
                outage=self._outage,
            )
            try:
                listener.start()
            except StoreError as exc:
                runner.close()
                raise StoreUnavailableError(str(exc)) from exc
            except BaseException:
                runner.close()
                raise
            self._runner, self._listener, self._opened = runner, listener, True

    async def close(self) -> None:
        if self._opened or self._advisory:
            await asyncio.get_running_loop().run_in_executor(None, self.close_sync)

    def close_sync(self) -> None:
        for worker_id in list(self._advisory):
            self._release_sync(worker_id)
        with self._open_lock:
            runner, listener = self._runner, self._listener
            self._runner = self._listener = None
            self._opened = False
        if listener is not None:
            listener.stop(poke=runner.notify if runner is not None else None)
        if runner is not None:
            runner.close()

    def _running(self) -> PgRunner:
        runner = self._runner
        if runner is None:
            raise StoreError("the PostgreSQL store is not open; call `await store.open()` first")
        return runner

    async def _read(self, op: Any) -> Any:
        return await self._running().call(op, write=False)

    async def _write(self, op: Any, notify: Any = False) -> Any:
        return await self._running().call(op, write=True, notify=notify)

    async def wait_for_change(self, timeout: float, key: object | None = None) -> None:
        await self._local_bell.wait(timeout, key)

    # -- what SQLite says differently -----------------------------------------------------
    async def hold_liveness(self, worker_id: str) -> str | None:
        existing = self._advisory.get(worker_id)
        if existing is not None:
            return existing.token
        holder = AdvisoryToken(self.conninfo, worker_id, self.where)
        try:
            await asyncio.get_running_loop().run_in_executor(None, holder.start)
        except psycopg.Error as exc:
            raise StoreError(
                f"could not take the liveness lock on PostgreSQL at {self.where}: {exc}"
            ) from exc
        self._advisory[worker_id] = holder
        return holder.token

    async def release_liveness(self, worker_id: str) -> None:
        if worker_id in self._advisory:
            await asyncio.get_running_loop().run_in_executor(None, self._release_sync, worker_id)

    def _release_sync(self, worker_id: str) -> None:
        holder = self._advisory.pop(worker_id, None)
        if holder is not None:
            holder.stop()

    def _refresh_liveness(self) -> None:
        return None  # the holder thread keeps its lock

    def _probe_liveness(self, conn: Any, owners: list[tuple[str, str]]) -> dict[str, bool | None]:
        return advisory_states(conn, owners)


def migrate(conninfo: str, where: str) -> int:
    """Apply pending migrations; returns the schema version. Many processes may
    call this at once: an advisory lock lets one migrate while the others wait.

    Raises:
        StoreUnavailableError: the database cannot be reached now (down, starting up,
            shutting down, out of connections): waiting may help.
        StoreError: it refused in a way waiting cannot fix (a wrong password, a role or
            database that does not exist, no right to create the tables).
        SchemaVersionError: the database is newer than this code.
    """
    known = load_migrations("postgresql")
    try:
        conn = psycopg.connect(conninfo)
    except psycopg.OperationalError as exc:
        raise connect_error(exc, where) from None
    try:
        with conn:
            return _apply(conn, known, where)
    except psycopg.Error as exc:
        if isinstance(exc, psycopg.OperationalError) and _transient_state(exc.sqlstate):
            raise StoreUnavailableError(
                f"lost PostgreSQL at {where} while migrating: {first_line(exc)}"
            ) from None
        state = f" [{exc.sqlstate}]" if exc.sqlstate else ""
        raise StoreError(
            f"PostgreSQL at {where} refused the migrations{state}: {first_line(exc)}"
        ) from None


def _apply(conn: psycopg.Connection[Any], known: list[Migration], where: str) -> int:
    # A schema already current needs no lock and no DDL: a worker's role, which may not
    # create anything (``worker_role.sql``), opens the store this way.
    if rows.value(conn, "SELECT to_regclass('keepgoing_schema') IS NOT NULL"):
        current = int(
            rows.value(conn, "SELECT COALESCE(MAX(version), 0) FROM keepgoing_schema") or 0
        )
        check_version(current, known, where)
        if current >= (known[-1].version if known else 0):
            return current
    conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
    conn.execute(
        "CREATE TABLE IF NOT EXISTS keepgoing_schema (version INTEGER PRIMARY KEY, "
        "name TEXT NOT NULL, applied_at DOUBLE PRECISION NOT NULL)"
    )
    applied = int(rows.value(conn, "SELECT COALESCE(MAX(version), 0) FROM keepgoing_schema") or 0)
    check_version(applied, known, where)
    for migration in known:
        if migration.version > applied:
            conn.execute(migration.sql.encode())
            conn.execute(
                "INSERT INTO keepgoing_schema (version, name, applied_at) VALUES (%s, %s, %s)",
                (migration.version, migration.name, system_clock.now()),
            )
    return max([applied, *(m.version for m in known)])


#: What a refused connection says when retrying cannot help. libpq reports no
#: SQLSTATE for a failed connection, only the server's message; anything not
#: recognised here (refused, timed out, starting up, too many clients, no such
#: host yet) is taken as a database that may come back.
_PERMANENT = (
    "authentication failed",  # password, md5, scram, peer, ident ...
    "no password supplied",
    "password is required",
    "no pg_hba.conf entry",
    "does not exist",  # the role or the database
    "not permitted to log in",
    "permission denied for database",
    "server does not support ssl",
    "certificate",
    "invalid value for parameter",  # options=-c ... that the server rejects
    "unrecognized configuration parameter",
)


def connect_error(exc: psycopg.OperationalError, where: str) -> StoreError:
    """The error for a failed connection: :class:`StoreUnavailableError` if waiting
    may help, else a :class:`StoreError` that says retrying will not."""
    reason = first_line(exc).removeprefix("connection failed: ")
    message = f"could not connect to PostgreSQL at {where}: {reason}"
    lowered = str(exc).lower()
    if any(marker in lowered for marker in _PERMANENT):
        return StoreError(f"{message} (retrying cannot fix this; check the store URL)")
    return StoreUnavailableError(message)


def _transient_state(sqlstate: str | None) -> bool:
    # None: the connection broke; 08 connection, 53 resources, 57 operator intervention.
    return sqlstate is None or sqlstate[:2] in ("08", "53", "57")
