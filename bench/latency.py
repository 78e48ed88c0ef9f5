"""``latency``: end-to-end latency of a one-step workflow.

One worker subprocess. Each sample is the wall time of
``client.trigger_workflow(one_step, wait=True)``: the start commit, the
worker's wake-up, the step, the completion commit and the client noticing
it. Samples are sequential, after a warm-up; p50 and p95 are taken per
repetition and the medians of those are reported.
"""

from __future__ import annotations

import time

from bench._harness import Config, Measurement, Workspace, percentile
from bench._workflows import one_step

NAME = "latency"
WARMUP = 10
TARGET_P50_MS = 1.5  # issue 31's target


def run(config: Config) -> list[Measurement]:
    samples = 40 if config.quick else 120
    p50s: list[float] = []
    p95s: list[float] = []
    with Workspace(NAME) as workspace:
        workspace.start_worker()
        client = workspace.client
        for _ in range(WARMUP):
            client.trigger_workflow(one_step, wait=True, timeout=60)
        for rep in range(config.repeat):
            times: list[float] = []
            for _ in range(samples):
                began = time.perf_counter()
                client.trigger_workflow(one_step, wait=True, timeout=60)
                times.append((time.perf_counter() - began) * 1000)
            p50s.append(percentile(times, 50))
            p95s.append(percentile(times, 95))
            config.log(f"  {NAME} rep {rep + 1}: p50={p50s[-1]:.2f} ms p95={p95s[-1]:.2f} ms")
    detail = {"samples_per_repetition": samples, "warmup": WARMUP}
    return [
        Measurement(NAME, "one-step workflow, p50", "ms", p50s, TARGET_P50_MS, "<=", detail),
        Measurement(f"{NAME}_p95", "one-step workflow, p95", "ms", p95s, detail=detail),
    ]
