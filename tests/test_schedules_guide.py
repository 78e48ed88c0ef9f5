"""The guide's "Schedules" examples, as written (a worker's start is recorded first:
a schedule needs a workflow that something serves)."""

from __future__ import annotations

from pathlib import Path

import pytest

from keepgoing import Client, workflow
from keepgoing.testing import fake_clock


@workflow
async def weekly_report(team: str) -> str:
    return f"report for {team}"


def _served(client: Client, now: float) -> None:
    client._backend.run(client.store.record_workflows(["weekly_report"], ["default"], now))  # type: ignore[attr-defined]


def test_the_guides_first_example(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with Client(store=f"sqlite:///{tmp_path / 'kg.db'}") as client:
        _served(client, 0)
        client.create_schedule(
            "report-weekly",
            weekly_report,
            {"team": "support"},
            cron="0 8 * * 1",
            timezone="Europe/Paris",
        )
        info = client.get_schedule("report-weekly")
        assert info.description == "cron 0 8 * * 1 (Europe/Paris)"
        assert len(info.next_fire_times[:2]) == 2


def test_the_guides_fake_clock_example(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with Client(store="sqlite:///test.db") as client, fake_clock() as clock:
        _served(client, clock.now())
        client.create_schedule(
            "report-daily", weekly_report, {"team": "qa"}, cron="0 8 * * *", overlap="allow_all"
        )
        assert clock.run_schedules(client, "7d") == 7
