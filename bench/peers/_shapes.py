"""The workloads, named once, with what they measure and which way is better."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["BATCH", "SHAPES", "STARTS", "STEPS", "Shape"]

#: Sequential steps in the long run of ``per_step`` (the short run has one).
STEPS = 20
#: One-step workflows started by ``starts``.
STARTS = 500
#: Runs per ``Client.trigger_many`` call in ``starts_many``.
BATCH = 100


@dataclass(frozen=True)
class Shape:
    name: str
    label: str
    unit: str
    higher_is_better: bool


SHAPES: tuple[Shape, ...] = (
    Shape(
        "per_step",
        f"ms per added sequential step (in-process run of {STEPS} steps vs 1)",
        "ms",
        False,
    ),
    Shape(
        "starts",
        f"one-step workflows/s: one thread starts {STARTS} without waiting, then waits; 2 workers",
        "wf/s",
        True,
    ),
    Shape(
        "starts_many",
        f"the same, keepgoing starting them with trigger_many, {BATCH} a call "
        "(DBOS has no batch start: it enqueues each)",
        "wf/s",
        True,
    ),
    Shape(
        "wait_p50", "one-step workflow, start and wait for the result, p50; 1 worker", "ms", False
    ),
    Shape("sleep", "durable sleep(0.1) overhead (in-process)", "ms", False),
)
