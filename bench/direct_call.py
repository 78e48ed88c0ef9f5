"""``direct_call``: the cost of each added step when a workflow is awaited directly.

Run it alone with ``python -m bench.direct_call`` (``--repeat N``, ``--quick``).

A direct call (``await wf(...)``) runs the workflow in this process on a
private store of its own, with tasks on the calling event loop (sync ones in
threads). One event loop awaits ``chain(n=1)`` and ``chain(n=50)``
alternately, for a sync trivial task and for an async one; each call's
wall-clock time, from the ``await`` to its result, includes opening and
closing the private store. Per repetition, ``(median(d50) - median(d1)) / 49``
is the cost of one added step, and ``median(d1)`` the fixed cost of a call.
The same figure in CPU time (``time.process_time``, every thread of the
process) is reported beside it: it moves less when other work loads the
machine.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time

from bench._harness import Config, Measurement, median
from keepgoing import task, workflow

__all__ = ["NAME", "main", "run"]

NAME = "direct_call"
LONG = 50


@task
def sync_step(i: int) -> int:
    """A sync trivial step (runs in a thread)."""
    return i


@task
async def async_step(i: int) -> int:
    """An async trivial step (runs on the calling event loop)."""
    return i


@workflow
async def sync_chain(n: int) -> int:
    """``n`` sequential sync trivial steps."""
    total = 0
    for i in range(n):
        total += await sync_step(i)
    return total


@workflow
async def async_chain(n: int) -> int:
    """``n`` sequential async trivial steps."""
    total = 0
    for i in range(n):
        total += await async_step(i)
    return total


async def _timed(kind: str, n: int) -> tuple[float, float]:
    """Wall-clock and CPU seconds (every thread of this process) of one call."""
    chain = sync_chain if kind == "sync" else async_chain
    started, cpu = time.perf_counter(), time.process_time()
    result = await chain(n)
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    if result != n * (n - 1) // 2:
        raise AssertionError(f"{kind} chain({n}) returned {result}")
    return elapsed, cpu


async def _measure(config: Config, kind: str) -> Measurement:
    per_run = 4 if config.quick else 10
    for n in (1, LONG):  # warm-up: imports, caches, the first store
        await _timed(kind, n)
    figures: list[float] = []
    short_ms: list[float] = []
    cpu_figures: list[float] = []
    for rep in range(config.repeat):
        short: list[tuple[float, float]] = []
        long: list[tuple[float, float]] = []
        for _ in range(per_run):
            short.append(await _timed(kind, 1))
            long.append(await _timed(kind, LONG))
        d1, d50 = median([s[0] for s in short]), median([s[0] for s in long])
        c1, c50 = median([s[1] for s in short]), median([s[1] for s in long])
        figures.append((d50 - d1) / (LONG - 1) * 1000)
        cpu_figures.append((c50 - c1) / (LONG - 1) * 1000)
        short_ms.append(d1 * 1000)
        config.log(
            f"  {NAME} {kind} rep {rep + 1}: d1={d1 * 1000:.2f} ms d{LONG}={d50 * 1000:.2f} ms "
            f"-> {figures[-1]:.3f} ms/step ({cpu_figures[-1]:.3f} ms CPU)"
        )
    return Measurement(
        name=f"{NAME}_{kind}",
        label=f"per added step, {kind} task, awaited directly",
        unit="ms",
        runs=figures,
        detail={
            "calls_per_repetition": per_run * 2,
            "d1_ms_median": median(short_ms),
            "cpu_ms_per_step_median": median(cpu_figures),
        },
    )


def run(config: Config) -> list[Measurement]:
    return [asyncio.run(_measure(config, kind)) for kind in ("sync", "async")]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.direct_call", description="direct-call cost per added step"
    )
    parser.add_argument("--quick", action="store_true", help="3 short repetitions")
    parser.add_argument("--repeat", type=int, default=None, help="repetitions (default 5)")
    args = parser.parse_args(argv)
    repeat = args.repeat or (3 if args.quick else 5)
    config = Config(quick=args.quick, repeat=repeat)
    for m in run(config):
        detail = ", ".join(f"{k}={v:.2f}" for k, v in m.detail.items())
        runs = " ".join(f"{r:.3f}" for r in m.runs)
        print(f"{m.label}: median {median(m.runs):.3f} {m.unit} (runs: {runs}; {detail})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
