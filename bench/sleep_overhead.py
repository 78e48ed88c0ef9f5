"""``sleep_overhead``: what a durable timer adds beyond the time slept.

One worker subprocess runs ``napper(nap=0.1)`` (step, durable
``asyncio.sleep(0.1)``, step) and ``napper(nap=0)`` (the two steps alone),
alternating, one at a time. Durations come from the store's timestamps.
Per repetition, ``median(d_sleep) - median(d_nosleep) - 0.1 s`` is the
overhead: recording the timer, firing it, and resuming the run.
"""

from __future__ import annotations

from bench._harness import Config, Measurement, Workspace, median, run_duration
from bench._workflows import napper

NAME = "sleep_overhead"
TARGET_MS = 2.0
NAP = 0.1


def run(config: Config) -> list[Measurement]:
    per_run = 4 if config.quick else 10
    figures: list[float] = []
    with Workspace(NAME) as workspace:
        workspace.start_worker()
        client = workspace.client
        for nap in (0.0, NAP):  # warm-up
            client.trigger_workflow(napper, {"nap": nap}, wait=True, timeout=60)
        for rep in range(config.repeat):
            plain: list[float] = []
            slept: list[float] = []
            for _ in range(per_run):
                for nap, into in ((0.0, plain), (NAP, slept)):
                    handle = client.trigger_workflow(napper, {"nap": nap})
                    client.result(handle, timeout=60)
                    into.append(run_duration(client, handle))
            figures.append((median(slept) - median(plain) - NAP) * 1000)
            config.log(
                f"  {NAME} rep {rep + 1}: without={median(plain) * 1000:.2f} ms "
                f"with={median(slept) * 1000:.2f} ms -> {figures[-1]:.2f} ms"
            )
    return [
        Measurement(
            name=NAME,
            label=f"durable sleep({NAP:g}s), beyond the nap",
            unit="ms",
            runs=figures,
            target=TARGET_MS,
            op="<=",
            detail={"workflows_per_repetition": per_run * 2},
        )
    ]
