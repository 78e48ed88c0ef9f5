"""The autoscaler records the terminations a backend's cluster reports (OOMKilled) as
stops of the workers that ran there, once each; a real SQLite store, a stand-in backend."""

from __future__ import annotations

from pathlib import Path

from contract._builders import NOW, QUEUE, TTL, claim_one, start_with, task, worker
from keepgoing._groups.autoscaler import Autoscaler
from keepgoing._groups.spec import GroupRevision, Instance
from keepgoing._groups.worker_stops import Termination
from keepgoing._history.events import TaskAttemptFailed
from keepgoing._store.sqlite import SqliteStore


class PodsBackend:
    """A cluster that scales by itself and reports one container it OOMKilled."""

    name = "kubernetes"

    def __init__(self, ended: list[Termination]) -> None:
        self.ended = ended
        self.asked = 0

    def ensure_group(self, revision: GroupRevision) -> None: ...

    def set_secrets(self, group: str, secrets: object, revision: int | None = None) -> None: ...

    def set_replicas(self, group: str, replicas: int, revision: int | None = None) -> None: ...

    def retire_revision(self, group: str, revision: int) -> None: ...

    def list_instances(self, group: str) -> list[Instance]:
        return []

    def kill_instance(self, group: str, instance_id: str) -> None: ...

    def terminations(self, group: str) -> list[Termination]:
        self.asked += 1
        return self.ended


class Fixed:
    """The contract builders' instant, so the stop and the lease share one clock."""

    def now(self) -> float:
        return NOW + 1


async def test_terminations_become_stops_of_the_pods_workers(tmp_path: Path) -> None:
    store = SqliteStore(str(tmp_path / "kg.db"))
    await store.open()
    try:
        spec = GroupRevision("pods", 0, QUEUE, "# app\n", "app.py").to_json()
        await store.deploy_group(
            name="pods", task_queue=QUEUE, backend="kubernetes", parent=None, spec=spec, now=NOW
        )
        await store.register_worker(worker("w-pod", host="pods-abc", queues=[QUEUE]))
        run, _ = await start_with(store, [task(1)])
        await claim_one(store, worker="w-pod", now=NOW)
        ended = [Termination("pods-abc", "pods-abc", NOW + 0.5, "oom_killed", "OOMKilled")]
        backend = PodsBackend(ended)
        scaler = Autoscaler(store, {"kubernetes": backend}, clock=Fixed())

        await scaler.tick()
        await scaler.tick()  # the same termination is recorded once

        assert backend.asked == 2
        assert await store.reap_expired_leases(now=NOW + TTL + 1, limit=10) == 1
        history = await store.read_history(run.run_id)
        (lost,) = [e for e in history if isinstance(e, TaskAttemptFailed)]
        assert (lost.cause, lost.via) == ("oom_killed", "kubernetes")
    finally:
        await store.close()
