"""``/api/v1/schedules`` through the HTTP client: permissions, audit, the run's slot."""

from __future__ import annotations

from datetime import UTC, datetime

import httpx
import pytest

from keepgoing import Client, InvalidScheduleError, PermissionDeniedError, ScheduleNotFoundError

from ._support import Stack, wait_until

pytestmark = pytest.mark.integration


def test_schedules_over_http(stack: Stack, admin: httpx.Client) -> None:
    writer = stack.token("planner", "schedules.read", "schedules.write", "runs.read")
    reader = stack.token("viewer", "schedules.read")
    with Client(stack.url, token=writer) as client, Client(stack.url, token=reader) as viewer:
        with pytest.raises(InvalidScheduleError, match="no worker or deploy"):
            client.create_schedule("http-s", "no_such_workflow", every="1h")
        with pytest.raises(InvalidScheduleError, match="unknown time zone"):
            client.create_schedule("http-s", "sum_two", cron="@daily", timezone="Mars/Olympus")
        info = client.create_schedule(
            "http-s", "sum_two", {"a": 1, "b": 2}, cron="0 8 * * 1-5", timezone="Europe/Paris"
        )
        assert len(info.next_fire_times) == 5 and info.description.startswith("cron 0 8")
        with pytest.raises(PermissionDeniedError, match=r"schedules\.write"):
            viewer.trigger_schedule("http-s")
        assert [s.schedule_id for s in viewer.list_schedules()] == ["http-s"]

        action = client.trigger_schedule("http-s")
        assert action.status == "started"
        run = client.get_run(action.workflow_id)
        wait_until(lambda: client.get_run(action.workflow_id).status == "completed", 30, "run")
        assert run.workflow_name == "sum_two"
        assert (run.schedule_id, run.schedule_slot) == ("http-s", action.slot_at)

        assert client.pause_schedule("http-s", note="freeze").paused
        assert not client.unpause_schedule("http-s").paused
        changed = client.update_schedule("http-s", every="2h")
        assert changed.spec.every == 7200 and changed.spec.cron is None
        week = datetime(2026, 1, 5, tzinfo=UTC), datetime(2026, 1, 5, 5, tzinfo=UTC)
        assert len(client.backfill_schedule("http-s", *week)) == 3  # 00:00, 02:00, 04:00

        shown = viewer.get_schedule("http-s")
        assert [a.kind for a in shown.recent_actions].count("backfill") == 3
        client.delete_schedule("http-s")
        with pytest.raises(ScheduleNotFoundError):
            viewer.get_schedule("http-s")
    audit = admin.get("/api/v1/audit", params={"action": "schedule.trigger"}).json()
    entries = audit["entries"] if isinstance(audit, dict) else audit
    assert entries[0]["actor_id"] == "planner"
