"""The autoscaler's pinning on a real SQLite store and a recording backend: each revision
is scaled on its own runs' work, to zero while they wait, and retired after the last."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path

import pytest

from keepgoing._groups.autoscaler import Autoscaler
from keepgoing._groups.spec import GroupRevision, Instance
from keepgoing._history.events import Event, MessageWaitStarted, WorkflowCompleted
from keepgoing._store.protocol import Store
from keepgoing._store.records import ActivationCommit, MessageRequest, StartRequest
from keepgoing._store.sqlite import SqliteStore

pytestmark = pytest.mark.timeout(30)

QUEUE = "workflows.g"
T0 = 1_000_000.0


class Clock:
    def __init__(self) -> None:
        self.t = T0

    def now(self) -> float:
        return self.t

    def monotonic(self) -> float:
        return self.t

    async def sleep(self, seconds: float) -> None:
        self.t += seconds


class Recording:
    """A backend that runs nothing and remembers what it was asked."""

    name = "fake"

    def __init__(self) -> None:
        self.ensured: list[int] = []
        self.replicas: dict[int, int] = {}
        self.retired: list[int] = []
        self.current = 0

    def ensure_group(self, revision: GroupRevision) -> None:
        self.ensured.append(revision.revision)
        self.current = max(self.current, revision.revision)

    def set_secrets(
        self, group: str, secrets: Mapping[str, str], revision: int | None = None
    ) -> None:
        pass

    def set_replicas(self, group: str, replicas: int, revision: int | None = None) -> None:
        self.replicas[self.current if revision is None else revision] = replicas

    def retire_revision(self, group: str, revision: int) -> None:
        self.retired.append(revision)
        self.replicas.pop(revision, None)

    def list_instances(self, group: str) -> list[Instance]:
        return []

    def kill_instance(self, group: str, instance_id: str) -> None:
        raise NotImplementedError


async def deploy(store: Store, now: float) -> int:
    spec = GroupRevision(
        group="g",
        revision=0,
        task_queue=QUEUE,
        source="x = 1\n",
        filename="app.py",
        shutdown_delay_seconds=0.0,
    )
    return await store.deploy_group(
        name="g", task_queue=QUEUE, backend="fake", parent=None, spec=spec.to_json(), now=now
    )


async def start(store: Store, workflow_id: str, now: float) -> str:
    run = await store.start_run(
        StartRequest(
            run_id=f"run-{workflow_id}",
            workflow_id=workflow_id,
            workflow_name="wf",
            input={"args": [], "kwargs": {}},
            task_queue=QUEUE,
            code_version="v",
            now=now,
        )
    )
    return run.run_id


async def commit(
    store: Store, run_id: str, commands: list[Event], now: float, revision: int
) -> None:
    (claim,) = await store.claim_activations(
        worker_id="w",
        queues=[QUEUE],
        workflow_names=["wf"],
        limit=1,
        lease_ttl=10,
        now=now,
        revision=revision,
    )
    assert claim.run.run_id == run_id
    result = await store.commit_activation(
        ActivationCommit(
            run_id=run_id,
            fence=claim.fence,
            worker_id="w",
            saw_upto=claim.run.last_input_seq,
            time=now,
            commands=commands,
            now=now,
        )
    )
    assert result.ok


def test_each_revision_scales_on_its_own_runs_and_retires(tmp_path: Path) -> None:
    asyncio.run(_scenario(tmp_path))


async def _scenario(tmp_path: Path) -> None:
    store = SqliteStore(str(tmp_path / "kg.db"))
    await store.open()
    clock, backend = Clock(), Recording()
    scaler = Autoscaler(store, {"fake": backend}, clock=clock)
    try:
        await deploy(store, clock.t)
        old = await start(store, "old", clock.t)
        await scaler.tick()
        assert backend.replicas == {1: 1}  # revision 1's run is runnable

        await commit(store, old, [MessageWaitStarted(cmd=1, name="go")], clock.t, 1)
        await deploy(store, clock.t)
        clock.t += 1
        await scaler.tick()
        clock.t += 1
        await scaler.tick()
        assert backend.replicas == {1: 0, 2: 0}  # its run waits: revision 1 at zero, kept
        assert backend.retired == [] and 1 in backend.ensured

        new = await start(store, "new", clock.t)
        await scaler.tick()
        assert backend.replicas == {1: 0, 2: 1}  # the new run is revision 2's work only

        # The message arrives: revision 1 comes back for it.
        message = MessageRequest(
            workflow_id="old",
            name="go",
            payload=None,
            sender_kind="user",
            sender_id="t",
            now=clock.t,
        )
        await store.send_message(message)
        await scaler.tick()
        assert backend.replicas[1] == 1

        await commit(store, old, [WorkflowCompleted(result=1)], clock.t, 1)
        clock.t += 1
        await scaler.tick()
        assert backend.retired == [1]  # its last run ended
        revisions = {r.revision: r for r in await store.list_revisions("g")}
        assert revisions[1].retired_at is not None and revisions[2].retired_at is None
        audit = await store.list_audit(limit=10, action="groups.retire_revision")
        assert [(a.action, a.detail) for a in audit] == [
            ("groups.retire_revision", {"group": "g", "revision": 1})
        ]
        await commit(store, new, [WorkflowCompleted(result=2)], clock.t, 2)
        clock.t += 1  # the current revision is never retired
        await scaler.tick()
        assert backend.retired == [1]
    finally:
        await store.close()
