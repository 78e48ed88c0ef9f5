"""A deploy registers the schedules its file declares, updates them on a redeploy,
and pauses the ones the new code dropped."""

from __future__ import annotations

from pathlib import Path

import keepgoing

APP = """
from keepgoing import Schedule, workflow

@workflow(schedule=Schedule(every="{every}", schedule_id="tick"))
async def sched_tick() -> str:
    return "tock"
"""

PLAIN = """
from keepgoing import workflow

@workflow
async def sched_tick() -> str:
    return "tock"
"""


def test_deploy_registers_updates_and_pauses_declared_schedules(tmp_path: Path) -> None:
    source = tmp_path / "ticker.py"
    source.write_text(APP.format(every="1h"))
    with keepgoing.Client(store=f"sqlite:///{tmp_path / 'kg.db'}") as client:
        deployed = keepgoing.deploy_workflow_worker(source, client=client, build=False)
        info = client.get_schedule("tick")
        assert info.source == "code" and info.task_queue == deployed.task_queue
        assert info.spec.every == 3600

        source.write_text(APP.format(every="2h"))
        keepgoing.deploy_workflow_worker(source, client=client, build=False)
        assert client.get_schedule("tick").spec.every == 7200

        source.write_text(PLAIN)
        keepgoing.deploy_workflow_worker(source, client=client, build=False)
        dropped = client.get_schedule("tick")
        assert dropped.paused and "dropped from the code" in (dropped.note or "")
