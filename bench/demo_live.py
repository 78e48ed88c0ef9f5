"""``demo_live``: how long the demo's live run takes, and the worker-seconds it uses.

Run it alone with ``python -m bench.demo_live`` (``--fast`` for the CI mode).

It runs the demo's own stack (:class:`keepgoing._demo.stack.LocalStack`: the
server, the autoscaler with the local backend) on a fresh SQLite store, deploys
the support-digest agent as ``keepgoing demo`` does (``shutdown_delay_seconds=20``),
starts the live run (48 tickets, 6 batches, 60 s durable waits, model calls paced
at 1 s), and kills its worker once in the middle of a step after the first batch,
as a visitor of the demo page would.

**Live-run length**: the run's life (``ended_at - created_at``).
**Worker-seconds / wall-seconds**: the lives of the group's replicas
(``ended_at - started_at`` of each instance the autoscaler recorded), clipped to
the run's life, over the run's life. The waits hold no worker: the group goes
back to zero ``shutdown_delay_seconds`` into each wait and is woken ahead of the
timer by its measured cold start.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from keepgoing._demo.digest import GROUP, deploy_agent, kill_mid_run, start_run
from keepgoing._demo.stack import LocalStack


def measure(fast: bool) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="kg-demo-live-") as tmp:
        stack = LocalStack(Path(tmp) / "demo", fast=fast)
        with stack:
            worker = deploy_agent(stack)
            workflow_id = start_run(stack, worker, "week-42")
            kill_mid_run(stack, workflow_id, timeout=600)
            stack.client.result(workflow_id, timeout=1800)
            run = stack.client.get_run(workflow_id)
            assert run.ended_at is not None
            start, end = run.created_at, run.ended_at
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:  # every replica ended (or the run did)
                status = stack.client.groups.show(GROUP, decisions=0)
                if all(i.ended_at is not None for i in status.instances):
                    break
                time.sleep(0.5)
            busy = sum(
                max(0.0, min(end, i.ended_at or end) - max(start, i.started_at))
                for i in status.instances
            )
            return {
                "wall_seconds": end - start,
                "worker_seconds": busy,
                "share": busy / (end - start),
                "replicas": float(len(status.instances)),
            }


def main() -> None:
    parser = argparse.ArgumentParser(description="the demo's live run: length, worker-seconds")
    parser.add_argument("--fast", action="store_true")
    args = parser.parse_args()
    found = measure(args.fast)
    print(
        f"live run: {found['wall_seconds']:.1f} s wall ({found['wall_seconds'] / 60:.2f} min); "
        f"worker-seconds {found['worker_seconds']:.1f} = {100 * found['share']:.1f}% of wall; "
        f"{found['replicas']:.0f} replicas started"
    )


if __name__ == "__main__":
    main()
