"""Every table keepgoing creates on PostgreSQL is either granted to the workers' role or
named here with why it is not: a new table cannot be forgotten (a deployed group's
replicas, which connect as that role, would fail on it) nor granted without a thought."""

from __future__ import annotations

import re
from importlib import resources

from keepgoing._store.postgres.roles import worker_role_sql

#: Tables the workers' role gets nothing on, and why.
NOT_GRANTED = {
    "tokens": "API tokens: a replica must not mint or read them",
    "ui_sessions": "the web UI's sessions",
    "secrets": "the groups' secrets at rest",
    "audit_log": "the audit trail: deployed code must not write or erase it",
    "group_revisions": "what was deployed, with its env: the server's",
    "group_decisions": "the autoscaler's decisions",
    "group_instances": "the replicas the autoscaler runs",
    "reviews": "a person's decision on an uncertain operation: code must not approve itself",
    "schedules": "created by people and deploys (a replica does not register schedules)",
    "schedule_actions": "the scheduler's record of fired slots",
    "gateway_usage_days": "the retention sweep's per-day ledger, written by the server",
}


def _tables() -> set[str]:
    found: set[str] = set()
    migrations = resources.files("keepgoing._store.postgres").joinpath("migrations")
    for entry in sorted(migrations.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".sql"):
            continue
        text = entry.read_text()
        found |= set(re.findall(r"CREATE TABLE (?:IF NOT EXISTS )?(\w+)", text))
        found -= set(re.findall(r"DROP TABLE (?:IF EXISTS )?(\w+)", text))
    return found


def _granted() -> set[str]:
    body = "\n".join(
        line for line in worker_role_sql().splitlines() if not line.lstrip().startswith("--")
    )
    names: set[str] = set()
    for on in re.findall(r"GRANT [A-Z, ]+ ON\s+(.*?)\s+TO\b", body, re.S):
        names |= {name.strip() for name in on.split(",")}
    return names


def test_every_table_is_granted_to_workers_or_named_as_not() -> None:
    tables = _tables()
    assert "runs" in tables and "volume_reads" in tables  # the parse found the migrations
    forgotten = tables - _granted() - set(NOT_GRANTED)
    assert forgotten == set(), f"grant these in worker_role.sql or name them here: {forgotten}"
    both = _granted() & set(NOT_GRANTED)
    assert both == set(), f"granted and listed as not granted: {both}"


def test_a_new_table_without_a_grant_is_found() -> None:
    planted = _tables() | {"planted_table"}
    assert planted - _granted() - set(NOT_GRANTED) == {"planted_table"}
