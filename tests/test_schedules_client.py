"""Schedules through the client in store mode: create, fire, read the run's slot."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from keepgoing import Client, InvalidScheduleError, ScheduleNotFoundError
from keepgoing._clock import system_clock
from keepgoing.testing import fake_clock


def test_a_schedule_from_the_client_starts_runs_that_know_their_slot(tmp_path: Path) -> None:
    with Client(store=f"sqlite:///{tmp_path / 'kg.db'}") as client:
        client.store  # noqa: B018 (opens it)
        client._backend.run(  # type: ignore[attr-defined]
            client.store.record_workflows(["report"], ["default"], system_clock.now())
        )
        info = client.create_schedule("nightly", "report", {"day": 1}, every="1h")
        assert info.description == "every 1h"
        assert len(info.next_fire_times) == 5
        with pytest.raises(InvalidScheduleError, match="unknown time zone"):
            client.create_schedule("x", "report", cron="@daily", timezone="Nowhere/City")
        action = client.trigger_schedule("nightly")
        run = client.get_run(action.workflow_id)
        assert run.schedule_id == "nightly" and run.schedule_slot == action.slot_at
        assert run.input["kwargs"] == {"day": 1}
        paused = client.pause_schedule("nightly", note="holiday")
        assert paused.paused and paused.note == "holiday" and paused.next_fire_times == []
        assert client.unpause_schedule("nightly").next_fire_times
        updated = client.update_schedule("nightly", cron="0 8 * * 1-5", timezone="Europe/Paris")
        assert updated.spec.cron == "0 8 * * 1-5" and updated.spec.every is None
        assert [s.schedule_id for s in client.list_schedules()] == ["nightly"]
        assert client.get_schedule("nightly").recent_actions[0].run_id == run.run_id
        week = (datetime(2026, 1, 5, tzinfo=UTC), datetime(2026, 1, 11, tzinfo=UTC))
        done = client.backfill_schedule("nightly", *week)
        assert done[0].workflow_id == "nightly-2026-01-05T07:00:00Z"
        assert [a.status for a in done] == ["started"] * 5  # Monday to Friday, 08:00 Paris
        client.delete_schedule("nightly")
        with pytest.raises(ScheduleNotFoundError):
            client.get_schedule("nightly")


def test_a_fake_clock_runs_a_week_of_a_daily_schedule_at_once(tmp_path: Path) -> None:
    with Client(store=f"sqlite:///{tmp_path / 'kg.db'}") as client, fake_clock() as clock:
        client._backend.run(  # type: ignore[attr-defined]
            client.store.record_workflows(["report"], ["default"], clock.now())
        )
        client.create_schedule(
            "daily", "report", cron="0 8 * * *", timezone="Europe/Paris", overlap="allow_all"
        )
        assert clock.run_schedules(client, "7d") == 7
        runs = [a.workflow_id for a in client.get_schedule("daily").recent_actions]
        assert runs[-1] == "daily-2026-01-01T07:00:00Z" and runs[0] == "daily-2026-01-07T07:00:00Z"
        assert client.get_run(runs[0]).schedule_id == "daily"
