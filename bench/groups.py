"""``groups``: what scale-to-zero worker groups cost and how fast they wake.

Run it alone with ``python -m bench.groups`` (``--repeat N``, ``--quick``).

Each figure runs ``keepgoing groups serve`` (the autoscaler with the local
backend, and the orchestrator services) on a fresh embedded SQLite store and
deploys ``_groups_app.py`` with ``deploy_workflow_worker``.

**Worker-seconds / wall-seconds.** One run of three 1 s steps separated by two
60 s durable sleeps (``--quick``: 10 s), ``shutdown_delay_seconds=2``. Wall
seconds are the run's life (``ended_at - created_at``); worker-seconds are the
lives of the group's replicas (``ended_at - started_at`` of each instance the
autoscaler recorded), clipped to the run's life. Target: <= 10%.

**Cold start, warm environment.** The group at zero replicas, its environment
already there (no image: this interpreter's environment). Each sample is the
time from just before ``trigger`` to the first line of the run's first step
(``time.time()`` written to a file; one host, one clock): the doorbell waking
the autoscaler, the spawn, Python and keepgoing starting, the worker's claim
and the activation. The group is back at zero before each sample. Median of
5 samples per repetition. Target: <= 1.5 s.

**First build of a one-package image.** ``build_env`` of
``Image.debian_slim().pip_install("six")`` into an empty environment folder,
with uv's package cache warm (the usual case: uv's cache is shared between
environments) and cold (an empty ``UV_CACHE_DIR``, so the package is
downloaded). Reported, no target.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import keepgoing
from keepgoing._groups.envs import build_env

APP = Path(__file__).with_name("_groups_app.py")


def _wait(predicate: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(0.02)


class Stage:
    """A fresh store, the app deployed, and `keepgoing groups serve` running on it."""

    def __init__(self, root: Path, name: str) -> None:
        self.root = root
        shutil.copy(APP, root / "groups_bench.py")
        self.url = f"sqlite:///{root / 'kg.db'}"
        self.client = keepgoing.Client(store=self.url)
        self.env = {
            **os.environ,
            "KEEPGOING_GROUPS_DIR": str(root / "groups"),
            "KG_BENCH_DIR": str(root),
        }
        # The autoscaler first: a deploy to a store that nothing scales is refused.
        self.log = open(root / "serve.log", "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "keepgoing.cli", "groups", "serve", "--store", self.url],
            env=self.env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        _wait(self.client.groups.autoscaler_running, 30, "the autoscaler")
        self.worker = keepgoing.deploy_workflow_worker(
            root / "groups_bench.py", name=name, shutdown_delay_seconds=2, client=self.client
        )

    def running(self) -> int:
        status = self.client.groups.show(self.worker.scaling_group, decisions=0)
        return sum(i.state == "running" for i in status.instances)

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=60)
        self.log.close()
        self.client.close()


def worker_share(sleep: float) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        stage = Stage(Path(tmp), "bench-share")
        try:
            handle = stage.worker.trigger("three_steps", {"sleep": sleep})
            stage.client.result(handle.workflow_id, timeout=3 * sleep + 120)
            run = stage.client.get_run(handle.workflow_id)
            assert run.ended_at is not None
            _wait(lambda: stage.running() == 0, 60, "the group to go back to 0")
            start, end = run.created_at, run.ended_at
            status = stage.client.groups.show(stage.worker.scaling_group, decisions=0)
            busy = sum(
                max(0.0, min(end, i.ended_at or end) - max(start, i.started_at))
                for i in status.instances
            )
            return busy / (end - start)
        finally:
            stage.close()


def cold_starts(samples: int) -> list[float]:
    with tempfile.TemporaryDirectory() as tmp:
        stage = Stage(Path(tmp), "bench-cold")
        found = []
        try:
            for i in range(samples):
                _wait(lambda: stage.running() == 0, 60, "zero replicas")
                marker = Path(tmp) / f"first-{i}"
                before = time.time()
                handle = stage.worker.trigger("first_step", {"marker": str(marker)})
                _wait(marker.exists, 60, "the first step")
                found.append(float(marker.read_text()) - before)
                stage.client.result(handle.workflow_id, timeout=60)
        finally:
            stage.close()
        return found


def first_build(cold_cache: bool) -> float:
    image = keepgoing.Image.debian_slim().pip_install("six")
    with tempfile.TemporaryDirectory() as tmp:
        saved = os.environ.get("UV_CACHE_DIR")
        if cold_cache:
            os.environ["UV_CACHE_DIR"] = str(Path(tmp) / "uv-cache")
        try:
            started = time.monotonic()
            build_env(image, (), root=Path(tmp) / "envs")
            return time.monotonic() - started
        finally:
            if cold_cache:
                if saved is None:
                    os.environ.pop("UV_CACHE_DIR", None)
                else:
                    os.environ["UV_CACHE_DIR"] = saved


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="10 s sleeps instead of 60 s")
    args = parser.parse_args()
    sleep = 10.0 if args.quick else 60.0
    shares, colds, warm_builds, cold_builds = [], [], [], []
    for _ in range(args.repeat):
        cold = cold_starts(5)
        colds.append(statistics.median(cold))
        warm_builds.append(first_build(cold_cache=False))
        cold_builds.append(first_build(cold_cache=True))
        shares.append(worker_share(sleep))
        print(
            f"  worker share {shares[-1]:.1%}, cold start median {colds[-1]:.2f}s "
            f"(samples {', '.join(f'{c:.2f}' for c in cold)}), build {warm_builds[-1]:.2f}s "
            f"warm uv cache / {cold_builds[-1]:.2f}s cold",
            flush=True,
        )
    print(f"groups (medians of {args.repeat} repetition(s)):")
    print(
        f"  worker-seconds / wall-seconds, 3 x 1 s steps, two {sleep:.0f} s sleeps, "
        f"shutdown delay 2 s: {statistics.median(shares):.1%} (target <= 10%)"
    )
    print(
        f"  cold start 0 -> first step, warm environment: {statistics.median(colds):.2f}s "
        "(target <= 1.5 s)"
    )
    print(
        f"  first build of a one-package image: {statistics.median(warm_builds):.2f}s with uv's "
        f"cache warm, {statistics.median(cold_builds):.2f}s cold"
    )


if __name__ == "__main__":
    main()
