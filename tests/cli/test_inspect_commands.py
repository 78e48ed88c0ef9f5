"""`keepgoing runs` filters, cursors and counts, `show --logs` and `workers kill`,
against a live server and a real worker."""

from __future__ import annotations

import json
import re

import pytest

from .conftest import Kg
from .test_commands import _id, run_wait

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def test_runs_filters_cursor_and_counts(kg: Kg) -> None:
    tag = _id("cli-page")
    ids = [f"{tag}-{n}" for n in range(3)]
    for workflow_id in ids:
        assert run_wait(kg, "sum_two", {"a": 1, "b": 2}, workflow_id).returncode == 0
    first = kg("runs", "--id", tag, "--limit", "2")
    assert first.returncode == 0 and ids[2] in first.stdout and ids[0] not in first.stdout
    cursor = re.search(r"--cursor (\S+)", first.stdout)
    assert cursor is not None
    rest = kg("runs", "--id", tag, "--limit", "2", "--cursor", cursor.group(1), "--json")
    assert [r["workflow_id"] for r in json.loads(rest.stdout)] == [ids[0]]
    found = json.loads(
        kg("runs", "-q", tag.upper(), "--status", "completed,failed", "--json").stdout
    )
    assert sorted(r["workflow_id"] for r in found) == sorted(ids)
    counts = json.loads(kg("runs", "counts", "--id", tag, "--json").stdout)
    assert counts["counts"] == {"completed": 3} and counts["total"] == 3
    assert set(counts["trouble"].values()) == {0}
    assert kg("runs", "--trouble", "killed").returncode == 1
    table = kg("runs", "counts", "--workflow", "sum_two")
    assert table.returncode == 0 and "completed" in table.stdout
    bad = kg("runs", "--cursor", "not-a-cursor")
    assert bad.returncode == 1 and "cursor" in bad.stderr
    worse = kg("runs", "--status", "running,asleep")
    assert worse.returncode == 1 and "unknown status 'asleep'" in worse.stderr


def test_show_logs_of_a_run_that_printed_nothing(kg: Kg) -> None:
    workflow_id = _id("cli-logs")
    assert run_wait(kg, "two_steps", {"key": workflow_id}, workflow_id).returncode == 0
    shown = kg("show", workflow_id, "--logs")
    assert shown.returncode == 0 and "no attempt logs stored" in shown.stdout
    only = json.loads(kg("show", workflow_id, "--logs", "--step", "1", "--json").stdout)
    assert only["logs"] == []  # an attempt that printed nothing stores no row


def test_workers_kill_refuses_an_unknown_worker(kg: Kg) -> None:
    done = kg("workers", "kill", "no-such-worker")
    assert done.returncode == 1 and "no registered worker" in done.stderr
    assert kg("workers").returncode == 0  # the listing still works as a group's default
