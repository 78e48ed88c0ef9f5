"""What the retention tests share: a run started, claimed and completed in one call,
and an archive of a run whose rows are gone."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from keepgoing._history.events import WorkflowCompleted
from keepgoing._store.protocol import Store
from keepgoing._store.records import ActivationCommit, RunRecord, StartRequest
from keepgoing._worker.archive import write_archive


async def end_run(
    store: Store,
    run_id: str,
    workflow_id: str,
    *,
    now: float,
    result: Any = None,
    name: str = "nightly",
) -> RunRecord:
    """Start ``run_id`` of workflow ``name``, claim it and complete it at ``now``."""
    run = await store.start_run(
        StartRequest(
            run_id=run_id,
            workflow_id=workflow_id,
            workflow_name=name,
            input={},
            task_queue="default",
            code_version="v1",
            now=now,
        )
    )
    (claim,) = await store.claim_activations(
        worker_id="w", queues=["default"], workflow_names=[name], limit=1, lease_ttl=30, now=now
    )
    done = await store.commit_activation(
        ActivationCommit(
            run_id=run.run_id,
            fence=claim.fence,
            worker_id="w",
            saw_upto=claim.run.last_input_seq,
            time=now,
            commands=[WorkflowCompleted(result=result)],
            now=now,
        )
    )
    assert done.ok, done
    return run


def write_archived(
    archive: str | os.PathLike[str], run_id: str, workflow_id: str, result: Any
) -> Path | str:
    """An archive of a completed run of ``nightly`` (ended at t=2) under ``archive``."""
    run = RunRecord(
        run_id=run_id,
        workflow_id=workflow_id,
        workflow_name="nightly",
        status="completed",
        input={},
        task_queue="default",
        code_version="v1",
        created_at=1.0,
        updated_at=2.0,
        ended_at=2.0,
        result=result,
    )
    return write_archive(archive, run, [WorkflowCompleted(seq=2, at=2.0, result=result)])
