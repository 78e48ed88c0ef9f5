"""Change a workflow's code while runs are in flight, on purpose.

    python examples/safe_change.py

It uses a store of its own in a temporary folder and runs the autoscaler
(`keepgoing groups serve`) beside it. It deploys orders_v1.py, starts an order
that waits for a message, then deploys orders_v2.py with upgrade="auto": the
deploy first replays the waiting run's history on the new code (it passes,
thanks to the patched() guard), then moves the run to the new revision. The
moved run keeps its old branch; a new run takes the new one; revision 1 is
retired once no run is left on it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import keepgoing

HERE = Path(__file__).resolve().parent


def wait_for(check, what: str, limit: float = 60.0):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.1)
    raise TimeoutError(f"gave up waiting for {what}")


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        store = f"sqlite:///{folder}/orders.db"
        env = {**os.environ, "KEEPGOING_GROUPS_DIR": f"{folder}/groups"}
        serve = [sys.executable, "-m", "keepgoing.cli", "groups", "serve", "--store", store]
        scaler = subprocess.Popen(serve, env=env, stderr=subprocess.DEVNULL)
        client = keepgoing.Client(store=store)
        try:
            tour(client)
        finally:
            client.close()
            scaler.terminate()
            scaler.wait(timeout=60)


def waits_for_ship(client: keepgoing.Client, workflow_id: str) -> bool:
    """The run has reserved stock and now waits for the "ship" message."""
    kinds = {type(event).__name__ for event in client.history(workflow_id)}
    return "MessageWaitStarted" in kinds


def tour(client: keepgoing.Client) -> None:
    wait_for(client.groups.autoscaler_running, "the autoscaler to start")
    v1 = keepgoing.deploy_workflow_worker(
        HERE / "orders_v1.py", name="wf-orders", client=client, shutdown_delay_seconds=1
    )
    first = v1.trigger("order", {"order_id": "A-1"})
    wait_for(lambda: waits_for_ship(client, first.workflow_id), "A-1 to wait")
    revision = client.get_run(first.workflow_id).group_revision
    print(f"{first.workflow_id} reserved stock and waits, on revision {revision}")

    v2 = keepgoing.deploy_workflow_worker(
        HERE / "orders_v2.py",
        name="wf-orders",
        client=client,
        shutdown_delay_seconds=1,
        upgrade="auto",
    )
    assert v2.replay is not None
    print(f"deployed revision {v2.revision}; {v2.replay.bound()}; moved {len(v2.moved)} run(s)")

    second = v2.trigger("order", {"order_id": "B-2"})
    wait_for(lambda: waits_for_ship(client, second.workflow_id), "B-2 to wait")
    for handle in (first, second):
        client.send_workflow_message(handle.workflow_id, "ship")
        print(handle.workflow_id, client.result(handle.workflow_id, timeout=60))

    def retired() -> bool:
        revisions = client.groups.show("wf-orders", decisions=0).revisions
        return any(r.revision == 1 and r.retired_at is not None for r in revisions)

    wait_for(retired, "revision 1 to retire")
    print("revision 1 is retired: no run is left on it")


if __name__ == "__main__":
    main()
