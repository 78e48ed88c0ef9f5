"""``per_step``: the cost of each added sequential step.

One worker subprocess runs ``steps(n=1)`` and ``steps(n=20)`` one at a time,
alternating. Each run's duration is read from the store's own timestamps
(``WorkflowCompleted.at - WorkflowStarted.at``), so client polling does not
count. Per repetition, ``(median(d20) - median(d1)) / 19`` is the cost of
one added step.
"""

from __future__ import annotations

from bench._harness import Config, Measurement, Workspace, median, run_duration
from bench._workflows import steps

NAME = "per_step"
TARGET_MS = 0.4  # issue 31's target
LONG = 20


def run(config: Config) -> list[Measurement]:
    per_run = 4 if config.quick else 10
    figures: list[float] = []
    short_ms: list[float] = []
    long_ms: list[float] = []
    with Workspace(NAME) as workspace:
        workspace.start_worker()
        client = workspace.client
        for n in (1, LONG):  # warm-up: imports, caches, the first commits
            client.trigger_workflow(steps, {"n": n}, wait=True, timeout=60)
        for rep in range(config.repeat):
            short: list[float] = []
            long: list[float] = []
            for _ in range(per_run):
                for n, into in ((1, short), (LONG, long)):
                    handle = client.trigger_workflow(steps, {"n": n})
                    client.result(handle, timeout=60)
                    into.append(run_duration(client, handle))
            d1, d20 = median(short), median(long)
            figures.append((d20 - d1) / (LONG - 1) * 1000)
            short_ms.append(d1 * 1000)
            long_ms.append(d20 * 1000)
            config.log(
                f"  {NAME} rep {rep + 1}: d1={d1 * 1000:.2f} ms d20={d20 * 1000:.2f} ms "
                f"-> {figures[-1]:.3f} ms/step"
            )
    return [
        Measurement(
            name=NAME,
            label="per added sequential step",
            unit="ms",
            runs=figures,
            target=TARGET_MS,
            op="<=",
            detail={
                "workflows_per_repetition": per_run * 2,
                "d1_ms_median": median(short_ms),
                "d20_ms_median": median(long_ms),
            },
        )
    ]
