# /// script
# dependencies = ["keepgoing"]
# ///
"""JOB-B772, monthly reconciliation: an external job runs for a long time; the run waits for it.

The workflow submits the job to the batch system (idempotently, by job id)
and records the job id as the step's output. Then it waits for the completion
event by correlation id, with a deadline. The wait is stored and the worker is
released: while the job runs no worker is held, and the worker group scales to
zero. The run resumes from that point when the signal arrives, on whichever
worker the group starts; a signal that arrives early (before the wait) is kept
and matched, and a repeated one (the same event id) never advances it twice.

    python -m keepgoing._demo.services.jobs --folder /tmp/jobs --port 8766 \
        --store sqlite:///.keepgoing/keepgoing.db &
    keepgoing worker monthly_reconciliation.py
    keepgoing run monthly_reconciliation -i '{"job_id": "JOB-B772", "month": "2026-11",
        "jobs_url": "http://127.0.0.1:8766", "options": {"seconds": 30}}'
    # or, with "options": {"hold": true}, signal it yourself:
    keepgoing event job.completed JOB-B772 '{"rows": 18432}' --event-id JOB-B772-done
"""

from __future__ import annotations

import json
import os
import urllib.request
from typing import Any

from keepgoing import WorkflowMessageTimeoutError, operation_id, task, wait_for_event, workflow


def _journal(step: str, key: str) -> None:
    path = os.environ.get("DEMO_JOURNAL")
    if path:
        line = {"step": step, "key": key, "pid": os.getpid(), "operation": operation_id()}
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(line) + "\n")


@task(retries=3, retry_delay="500ms", timeout="30s")
def start_job(jobs_url: str, job_id: str, month: str, options: dict[str, Any]) -> dict[str, Any]:
    """Submit the job; the batch system accepts a job id once, so a retry is safe."""
    _journal("start_job", job_id)
    body = json.dumps(
        {"job_id": job_id, "kind": "monthly_reconciliation", "month": month, **options}
    )
    request = urllib.request.Request(
        f"{jobs_url}/jobs",
        data=body.encode(),
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        job: dict[str, Any] = json.loads(answer.read())
    return {"job_id": job["job_id"], "submitted_at": job["submitted_at"], "worker_pid": os.getpid()}


@task(timeout="30s")
def post_to_ledger(job_id: str, result: dict[str, Any]) -> dict[str, Any]:
    """Book the reconciliation's outcome (runs after the resume, on a fresh worker)."""
    _journal("post_to_ledger", job_id)
    return {"job_id": job_id, "booked_rows": result.get("rows"), "worker_pid": os.getpid()}


@workflow
async def monthly_reconciliation(
    job_id: str,
    month: str,
    jobs_url: str,
    deadline_seconds: float = 6 * 3600,
    options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    submitted = await start_job(jobs_url, job_id, month, options or {})
    try:
        done = await wait_for_event("job.completed", job_id, timeout=deadline_seconds)
    except WorkflowMessageTimeoutError:
        return {"job_id": job_id, "status": "deadline passed", "submitted": submitted}
    posted = await post_to_ledger(job_id, done.payload)
    return {
        "job_id": job_id,
        "status": "reconciled",
        "submitted": submitted,
        "completion_event": done.event_id,
        "posted": posted,
    }
