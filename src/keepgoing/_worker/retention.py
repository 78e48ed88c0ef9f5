"""Retention: the policy, and the sweep that archives and deletes ended runs.

The policy is the ``[retention]`` table of ``keepgoing.toml``::

    [retention]
    runs = "30d"          # the store's default; KEEPGOING_RETENTION overrides it
    archive = "/var/lib/keepgoing/archive"   # written before a run's rows go
                                             # (or an fsspec URL: "s3://bucket/kg")
    audit = "365d"        # the audit log's own policy (default 365 days)

and each workflow's own, ``@workflow(retention="7d")``, which its workers record
in the store. Until one is set nothing is deleted. The store's policy also
applies to schedules' actions (each schedule keeps its newest ten and those of
open runs). The rule of which runs may
go lives in the store (``_store/sql/retention.py``); this module only drives it.

One server sweeps at a time: the sweep holds the ``retention`` service lease
while it works. Each batch is read, archived (every file on disk first), then
deleted in one short transaction that checks the rule again and writes the
audit entry (the first batch of a pass writes it, the later ones add their
counts to it: one ``retention.sweep`` entry per pass); a process killed
between the two leaves its runs in the store, and the next sweep archives
them again and deletes them.

Batches are sized by how long their delete took (:func:`next_batch`), so one
batch holds SQLite's write lock for about :data:`HOLD_TARGET` at most, even
with ``synchronous=full`` on a slow disk: the first holds :data:`FIRST_BATCH`
runs, the next half as many when a delete took more than half the target,
twice as many when it took less than an eighth, never more than the policy's
``batch``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import time
import tomllib
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from keepgoing._clock import Clock, system_clock
from keepgoing._durations import parse_duration
from keepgoing._store.protocol import Store
from keepgoing._store.records import RunRecord
from keepgoing._store.retention_protocol import RetentionWindow, SweptRows
from keepgoing._worker.archive import write_archive
from keepgoing._worker.archive_fs import check_url, is_url
from keepgoing.errors import ConfigurationError, InvalidDurationError

__all__ = [
    "RETENTION_ENV",
    "RetentionPolicy",
    "RetentionSweep",
    "SweepReport",
    "load_retention",
    "next_batch",
    "parse_retention",
]

log = logging.getLogger("keepgoing.retention")

RETENTION_ENV = "KEEPGOING_RETENTION"
CONFIG_ENV = "KEEPGOING_CONFIG"
FAULT_ENV = "KEEPGOING_FAULT_POINT"
SERVICE = "retention"
DAY = 86400.0
_KEYS = ("runs", "archive", "audit", "batch", "interval")
#: The longest a batch's delete should hold the write lock, in seconds.
HOLD_TARGET = 0.050
#: The runs in a sweep's first batch, before any delete was timed.
FIRST_BATCH = 16


def next_batch(size: int, took: float, cap: int) -> int:
    """The next batch's size after a delete of ``size`` runs took ``took`` seconds:
    half when it took more than half of :data:`HOLD_TARGET`, twice when less than
    an eighth, else the same; always 1 to ``cap``."""
    if took > HOLD_TARGET / 2:
        size //= 2
    elif took < HOLD_TARGET / 8:
        size *= 2
    return max(1, min(cap, size))


@dataclass(frozen=True)
class RetentionPolicy:
    """The store's retention settings (seconds; ``runs=None``: keep runs forever)."""

    runs: float | None = None
    archive: str | None = None
    audit: float = 365 * DAY
    audit_set: bool = False  # the audit policy was given, so it applies with no run policy
    batch: int = 100
    interval: float = 60.0

    @property
    def on(self) -> bool:
        return self.runs is not None


@dataclass
class SweepReport:
    """What one sweep (or ``keepgoing runs prune``) did."""

    swept: SweptRows = field(default_factory=SweptRows)
    archived: list[str] = field(default_factory=list)
    audit_trimmed: int = 0
    volume_versions: int = 0  # versions dropped by the volumes' own policies
    volume_objects: int = 0  # objects no remaining version reads
    would_delete: list[RunRecord] = field(default_factory=list)  # a dry run's runs
    more: bool = False  # a batch was full: more runs are due now
    holds: list[float] = field(default_factory=list)  # each delete's time, seconds
    audit_id: int | None = None  # the pass's retention.sweep audit entry, once written


def parse_retention(data: dict[str, Any], *, source: str = "keepgoing.toml") -> RetentionPolicy:
    """The policy from parsed TOML (``data["retention"]``).

    Raises:
        ConfigurationError: a wrong key or value (the message names it).
    """
    table = data.get("retention", {})
    if not isinstance(table, dict):
        raise ConfigurationError(f"[retention] in {source} must be a table")
    unknown = sorted(set(table) - set(_KEYS))
    if unknown:
        raise ConfigurationError(
            f"[retention] in {source} has unknown key(s) {unknown}; known: {list(_KEYS)}"
        )
    runs = _duration(table.get("runs"), f"[retention] runs in {source}")
    audit = _duration(table.get("audit"), f"[retention] audit in {source}")
    archive = table.get("archive")
    if archive is not None and (not isinstance(archive, str) or not archive.strip()):
        raise ConfigurationError(
            f"[retention] archive in {source} must be a folder path or an fsspec URL"
        )
    if is_url(archive):
        check_url(archive)  # the extra and the scheme's package are there, or say so now
    batch = table.get("batch", 100)
    if isinstance(batch, bool) or not isinstance(batch, int) or not 1 <= batch <= 10000:
        raise ConfigurationError(f"[retention] batch in {source} must be 1..10000, not {batch!r}")
    interval = _duration(table.get("interval"), f"[retention] interval in {source}")
    return RetentionPolicy(
        runs=runs,
        archive=archive,
        audit=audit if audit is not None else 365 * DAY,
        audit_set=audit is not None,
        batch=batch,
        interval=interval if interval else 60.0,
    )


def _duration(value: object, what: str) -> float | None:
    if value is None:
        return None
    try:
        seconds = parse_duration(value, what=what)
    except InvalidDurationError as exc:
        raise ConfigurationError(str(exc)) from None
    if seconds <= 0:
        raise ConfigurationError(f"{what} must be longer than zero, not {value!r}")
    return seconds


def load_retention(path: str | os.PathLike[str] | None = None) -> RetentionPolicy:
    """The policy from ``path``, else ``KEEPGOING_CONFIG``, else ``./keepgoing.toml``
    when it exists; ``KEEPGOING_RETENTION`` (a duration, or ``off``) overrides
    its ``runs``.

    Raises:
        ConfigurationError: the file cannot be read or parsed, or a value is wrong.
    """
    chosen = path or os.environ.get(CONFIG_ENV)
    if chosen is None and Path("keepgoing.toml").is_file():
        chosen = "keepgoing.toml"
    data: dict[str, Any] = {}
    if chosen is not None:
        try:
            data = tomllib.loads(Path(chosen).read_text(encoding="utf-8"))
        except OSError as exc:
            raise ConfigurationError(f"cannot read the configuration {chosen}: {exc}") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigurationError(f"{chosen} is not valid TOML: {exc}") from None
    policy = parse_retention(data, source=str(chosen or "(no keepgoing.toml)"))
    env = os.environ.get(RETENTION_ENV)
    if env is not None and env.strip():
        runs = None if env.strip().lower() == "off" else _duration(env, RETENTION_ENV)
        policy = RetentionPolicy(
            runs=runs,
            archive=policy.archive,
            audit=policy.audit,
            audit_set=policy.audit_set,
            batch=policy.batch,
            interval=policy.interval,
        )
    return policy


def _fault_point(name: str) -> None:
    """A named crash point: ``KEEPGOING_FAULT_POINT=<name>`` makes the process
    SIGKILL itself here, so a test can stop a sweep exactly between its archive
    and its delete."""
    if os.environ.get(FAULT_ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)


class RetentionSweep:
    """Archives and deletes the ended runs past retention, in bounded batches.

    Args:
        store: an opened store.
        policy: the store's settings.
        clock: injected time.
        owner: who holds the sweep's service lease (one server at a time).
        batches: the most batches one :meth:`tick` deletes before it yields.
        timer: what times a batch's delete (wall time; the batch sizing's input).
    """

    def __init__(
        self,
        store: Store,
        policy: RetentionPolicy,
        *,
        clock: Clock = system_clock,
        owner: str | None = None,
        batches: int = 10,
        timer: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.store = store
        self.policy = policy
        self.clock = clock
        self.owner = owner or f"retention-{uuid.uuid4().hex[:12]}"
        self.batches = batches
        self._next = float("-inf")
        self._timer = timer
        self.batch_size = min(FIRST_BATCH, policy.batch)

    async def tick(self) -> bool:
        """One sweep when due (every ``interval``, at once after a full batch).
        True when more runs are due now."""
        if self.clock.monotonic() < self._next:
            return False
        now = self.clock.now()
        ttl = max(5.0, 3 * self.policy.interval)  # renewed each sweep; a dead holder soon frees it
        if not await self.store.claim_service(SERVICE, self.owner, ttl=ttl, now=now):
            self._next = self.clock.monotonic() + self.policy.interval
            return False
        window = RetentionWindow(now=now, default=self.policy.runs)
        report = await self.sweep(window)
        if self.policy.on:  # a schedule's old actions, past the same policy
            limit = self.policy.batch * self.batches
            actions = await self.store.prune_schedule_actions(
                window, limit, actor=self.owner, audit_id=report.audit_id
            )
            if actions:
                report.swept.add(SweptRows(rows={"schedule_actions": actions}))
            report.more = report.more or actions >= limit
        if self.policy.on or self.policy.audit_set:
            report.audit_trimmed = await self.store.trim_audit(
                now - self.policy.audit, self.policy.batch
            )
        if not report.more:  # volumes once the runs are caught up
            gc = await self.store.volume_gc(None, now)
            report.volume_versions, report.volume_objects = len(gc.versions), gc.objects
            if gc.versions:
                log.info(
                    "retention dropped %d volume version(s) and %d object(s)",
                    len(gc.versions),
                    gc.objects,
                    extra={"fields": {"event": "retention", "versions": len(gc.versions)}},
                )
        if report.swept.runs or report.audit_trimmed:
            log.info(
                "retention deleted %d run(s) (%d rows, %d archived), %d audit entries",
                report.swept.runs,
                report.swept.total,
                len(report.archived),
                report.audit_trimmed,
                extra={"fields": {"event": "retention", "runs": report.swept.runs}},
            )
        more = report.more or report.audit_trimmed >= self.policy.batch
        self._next = self.clock.monotonic() + (0.0 if more else self.policy.interval)
        return more

    async def sweep(
        self, window: RetentionWindow, *, dry_run: bool = False, archive: str | None = None
    ) -> SweepReport:
        """Up to :attr:`batches` batches of the runs ``window`` lets go."""
        report = SweepReport()
        folder = archive if archive is not None else self.policy.archive
        if dry_run:
            report.would_delete = await self.store.expired_runs(
                window, self.policy.batch * self.batches
            )
            return report
        seen: set[str] = set()
        for _ in range(self.batches):
            runs = [
                r
                for r in await self.store.expired_runs(window, self.batch_size)
                if r.run_id not in seen
            ]
            if not runs:
                return report
            seen.update(r.run_id for r in runs)
            if folder is not None:
                for run in runs:
                    events = await self.store.read_history(run.run_id)
                    path = await asyncio.to_thread(write_archive, folder, run, events)
                    report.archived.append(str(path))
            _fault_point("retention.archived")
            ids = [r.run_id for r in runs]
            began = self._timer()
            swept = await self.store.delete_runs(
                ids, window, actor=self.owner, audit_id=report.audit_id
            )
            took = self._timer() - began
            report.holds.append(took)
            report.swept.add(swept)
            if swept.audit_id is not None:
                report.audit_id = swept.audit_id
            self.batch_size = next_batch(len(ids), took, self.policy.batch)
        report.more = True
        return report
