"""The background-job pattern: keep the job id, release the worker, resume on its signal.

python examples/background_job.py
"""

from __future__ import annotations

import threading
from datetime import timedelta

from keepgoing import Client, operation_id, task, wait_for_event, workflow

STORE = "sqlite:///.keepgoing/examples.db"


@task
def start_reconciliation(job_id: str) -> str:
    # A real task would submit the job to an external system, passing
    # operation_id() as the idempotency key, and return the external job id.
    return f"{job_id} submitted as {operation_id()}"


@workflow
async def monthly_reconciliation(job_id: str) -> dict[str, object]:
    submitted = await start_reconciliation(job_id)
    done = await wait_for_event("job.completed", job_id, timeout=timedelta(hours=6))
    return {"submitted": submitted, "result": done.payload}


def external_system_finishes(job_id: str) -> None:
    with Client(store=STORE) as client:
        client.publish_event("job.completed", job_id, {"rows": 1200}, event_id=f"{job_id}-done")


if __name__ == "__main__":
    # The event may arrive before the workflow waits for it: it is kept and matched.
    threading.Thread(target=external_system_finishes, args=("JOB-B772",)).start()
    with Client(store=STORE) as client:
        print(client.run_workflow(monthly_reconciliation, {"job_id": "JOB-B772"}))
