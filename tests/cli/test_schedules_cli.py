"""``keepgoing schedules``: every subcommand against a live server, and bad input."""

from __future__ import annotations

import json

from server._support import Stack

from .conftest import Kg, run_kg


def test_schedules_commands(kg: Kg, stack: Stack) -> None:
    made = kg(
        "schedules",
        "create",
        "cli-s",
        "sum_two",
        "--input",
        '{"a": 1, "b": 2}',
        "--cron",
        "0 8 * * 1-5",
        "--timezone",
        "Europe/Paris",
    )
    assert made.returncode == 0 and "next: " in made.stdout
    bad = kg("schedules", "create", "cli-bad", "sum_two", "--cron", "0 8 * *")
    assert bad.returncode == 2 and "has 4 fields" in bad.stderr
    listed = kg("schedules", "ls", "--json")
    assert [s["schedule_id"] for s in json.loads(listed.stdout)] == ["cli-s"]
    assert kg("schedules", "pause", "cli-s", "--note", "freeze").returncode == 0
    assert "unpaused cli-s; next fire" in kg("schedules", "unpause", "cli-s").stdout
    fired = kg("schedules", "trigger", "cli-s", "--json")
    assert json.loads(fired.stdout)["status"] == "started"
    filled = kg(
        "schedules", "backfill", "cli-s", "2026-01-05T00:00:00Z", "2026-01-09T23:00:00Z", "--json"
    )
    assert [a["status"] for a in json.loads(filled.stdout)] == ["started"] * 5
    shown = kg("schedules", "show", "cli-s")
    assert "cron 0 8 * * 1-5 (Europe/Paris)" in shown.stdout and "backfill" in shown.stdout
    assert kg("schedules", "rm", "cli-s").returncode == 0
    gone = kg("schedules", "show", "cli-s")
    assert gone.returncode == 1 and "schedule_not_found" in gone.stderr


def test_schedules_on_the_store(stack: Stack) -> None:
    listed = run_kg(stack.root, "schedules", "ls", "--store", stack.store_url, "--json")
    assert listed.returncode == 0 and isinstance(json.loads(listed.stdout), list)
