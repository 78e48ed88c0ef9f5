"""The reused prefix of a resumed or forked run, held to what the code schedules now.

A run started from another run's history (``resume_workflow``, ``fork_workflow``)
reuses the recorded results of its origin's first steps: the store copies that
prefix (``_store/sql/prefix.py``) and marks the new run's ``WorkflowStarted``
with how far it reaches (``reused_upto``) and why (``reused_by``). At the run's
first activation the instance replays the prefix on the code it has now, and
every step the prefix scheduled must be scheduled again with the same name and
the same arguments: a result recorded for ``lookup_customer("c1")`` is no
answer to ``lookup_customer("c9")``. A mismatch raises :class:`PrefixMismatch`
while the prefix replays, so no step past it is ever scheduled; the worker
fails the run with it, not retried and not blocked. Once an activation past
the prefix has committed, the check has passed for good: a later replay (on
another worker, after an eviction) matches the prefix as any run's history is
matched, so code changed later blocks the run as it would any other.

The same rule holds a fork's reused prefix under a new input where the store
has the code (the replay check of a pinned revision, ``_worker/replayer.py``
with ``strict_args``): both ask :func:`first_difference`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from keepgoing._history import events as ev
from keepgoing.errors import NondeterminismError, ReuseRefusedError

__all__ = [
    "EVERYTHING",
    "REFUSED",
    "Difference",
    "PrefixMismatch",
    "Reused",
    "argument_mismatch",
    "first_difference",
    "key_mismatch",
    "reused",
]

_MISSING = object()

REFUSED = f"{ReuseRefusedError.__module__}.{ReuseRefusedError.__qualname__}"
"""The error type a run refused for its reused prefix fails with (its ``WorkflowFailed``)."""

Names = Callable[[str], Sequence[str]]
"""A task's positional parameter names, by task name (empty when unknown)."""


@dataclass(frozen=True)
class Reused:
    """How far a run's reused prefix reaches (a history seq) and why it was reused:
    ``"resume"``, ``"fork"`` or ``"fork_input"`` (a fork given a new input)."""

    upto: int
    by: str

    @property
    def what(self) -> str:
        return "resume" if self.by == "resume" else "fork"

    @property
    def now(self) -> str:
        return "the new input schedules" if self.by == "fork_input" else "the code now schedules"


EVERYTHING = Reused(upto=2**62, by="fork_input")
"""Every step replayed is reused (the check of a fork's prefix under a new input)."""


@dataclass(frozen=True)
class Difference:
    """The first argument by which a reused step differs: its label (a parameter
    name, or ``argument N``) and both values (``_MISSING``: not given)."""

    step: int
    name: str
    argument: str
    recorded: object
    now: object


class PrefixMismatch(NondeterminismError):
    """A step of a resumed or forked run's reused prefix is scheduled differently now.

    ``step`` is the first step that differs (None when no step can be named).
    The run fails with it at its first activation, before any step past the prefix.
    """

    def __init__(self, message: str, step: int | None) -> None:
        super().__init__(message)
        self.step = step


def reused(history: Sequence[ev.Event]) -> Reused | None:
    """The prefix a run's history reuses and must still be checked: None for a run
    that reuses none, or whose first activation past it has committed (it passed;
    a later replay matches as any run's does, and blocks on a mismatch)."""
    started = history[0] if history else None
    if not isinstance(started, ev.WorkflowStarted) or started.reused_upto is None:
        return None
    upto = started.reused_upto
    if any(isinstance(e, ev.ActivationCompleted) and e.seq > upto for e in history):
        return None
    return Reused(upto, started.reused_by or "fork")


def _plain(value: object) -> object:
    return json.loads(json.dumps(value, sort_keys=True, default=repr))


def _arguments(
    was: ev.TaskScheduled, now: ev.TaskScheduled, names: Sequence[str]
) -> Difference | None:
    for i in range(max(len(was.args), len(now.args))):
        old = _plain(was.args[i]) if i < len(was.args) else _MISSING
        new = _plain(now.args[i]) if i < len(now.args) else _MISSING
        if old != new:
            label = names[i] if i < len(names) else f"argument {i + 1}"
            return Difference(was.cmd, was.name, label, old, new)
    for key in [*was.kwargs, *(k for k in now.kwargs if k not in was.kwargs)]:
        old = _plain(was.kwargs[key]) if key in was.kwargs else _MISSING
        new = _plain(now.kwargs[key]) if key in now.kwargs else _MISSING
        if old != new:
            return Difference(was.cmd, was.name, key, old, new)
    return None


def first_difference(
    recorded: Sequence[ev.Event], produced: Sequence[ev.Event], names: Names
) -> Difference | None:
    """The first step scheduled with other arguments than it recorded, if any.

    ``recorded`` and ``produced`` match by key already (same kinds, numbers, names).
    """
    for was, now in zip(recorded, produced, strict=True):
        if isinstance(was, ev.TaskScheduled) and isinstance(now, ev.TaskScheduled):
            found = _arguments(was, now, names(now.name))
            if found is not None:
                return found
    return None


def _said(label: str, value: object) -> str:
    return f"no {label}" if value is _MISSING else f"{label}={value!r}"


def argument_mismatch(found: Difference, reused: Reused) -> PrefixMismatch:
    """The refusal naming the step, its task and the argument that differs."""
    return PrefixMismatch(
        f"{reused.what} refused: step {found.step} {found.name} was recorded with "
        f"{_said(found.argument, found.recorded)}, {reused.now} "
        f"{_said(found.argument, found.now)}; fork from step {found.step} or earlier",
        found.step,
    )


def key_mismatch(
    reused: Reused, recorded: Sequence[ev.Event], produced: Sequence[ev.Event], diff: str
) -> PrefixMismatch:
    """The refusal of a reused prefix the code no longer schedules at all (other
    steps, or in another order); ``diff`` is the side-by-side replay diff."""
    step = None
    for i, was in enumerate(recorded):
        if i >= len(produced) or was.key() != produced[i].key():
            step = was.cmd if isinstance(was, ev.TaskScheduled) else None
            break
    hint = f"fork from step {step} or earlier" if step else "fork from an earlier step"
    return PrefixMismatch(
        f"{reused.what} refused: {reused.now} other steps than the ones it reuses; {hint}\n{diff}",
        step,
    )
