"""``recovery``: how soon a killed worker's step runs again elsewhere.

Default worker settings. Worker A starts alone and picks up a step that
blocks on a marker file (each attempt appends its attempt number, pid and
``time.time()`` at start to a file). Worker B then starts and idles. A is
SIGKILLed at a measured instant; recovery is the start time of the retried
attempt on B minus the kill time. Each repetition uses a fresh store.
"""

from __future__ import annotations

import os
import time

from bench._harness import BenchError, Config, Measurement, Workspace, wait_until
from bench._workflows import blocked

NAME = "recovery"
TARGET_S = 2.0


def run(config: Config) -> list[Measurement]:
    figures: list[float] = []
    for rep in range(config.repeat):
        with Workspace(f"{NAME}{rep}") as workspace:
            figures.append(_once(workspace))
        config.log(f"  {NAME} rep {rep + 1}: {figures[-1]:.3f} s")
    return [
        Measurement(
            name=NAME,
            label="SIGKILL to retried step started",
            unit="s",
            runs=figures,
            target=TARGET_S,
            op="<=",
            detail={"settings": "defaults (lease_ttl 1.5 s, heartbeat 0.25 s)"},
        )
    ]


def _starts(folder: str) -> list[tuple[int, int, float]]:
    path = os.path.join(folder, "starts")
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as lines:
        parts = [line.split() for line in lines if line.endswith("\n")]
    return [(int(a), int(p), float(t)) for a, p, t in parts]


def _once(workspace: Workspace) -> float:
    folder = os.path.join(workspace.folder, "step")
    os.makedirs(folder)
    client = workspace.client
    worker_a = workspace.start_worker()
    handle = client.trigger_workflow(blocked, {"folder": folder})
    wait_until(lambda: len(_starts(folder)) >= 1, timeout=30, what="the step to start on A")
    if _starts(folder)[0][1] != worker_a.pid:
        raise BenchError("the first attempt did not run on worker A")
    worker_b = workspace.start_worker()
    time.sleep(0.5)  # B settles into its idle wait
    killed_at = worker_a.kill()
    wait_until(lambda: len(_starts(folder)) >= 2, timeout=30, what="the retry to start on B")
    attempt, pid, started = _starts(folder)[1]
    if pid != worker_b.pid:
        raise BenchError(f"attempt {attempt} ran on pid {pid}, not on worker B ({worker_b.pid})")
    with open(os.path.join(folder, "release"), "w", encoding="utf-8"):
        pass
    if client.result(handle, timeout=30) != 2:
        raise BenchError("the run did not complete with its second attempt")
    return started - killed_at
