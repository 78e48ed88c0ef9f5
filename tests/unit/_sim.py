"""A stand-in for the store in runtime unit tests.

:class:`Sim` keeps a run's history the way a store does: it gives every event
the next ``seq`` and the current time as ``at``, commits each activation as
``ActivationCompleted(saw_upto, time)`` followed by its commands, and moves the
instance's position past them as the worker does after a commit. Tests inject
inputs (task results, fired timers) between activations, or *during* one to
build the interleaving of DESIGN section 10, Trap 1.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Coroutine, Iterable, Sequence
from typing import Any, TypeVar

from keepgoing._history import events as ev
from keepgoing._runtime.instance import Activation, WorkflowInstance

__all__ = ["T0", "Sim", "commands_of", "keys", "replay_fresh"]

T0 = 1_767_225_600.0  # 2026-01-01T00:00:00Z

E = TypeVar("E", bound=ev.Event)
WorkflowFn = Callable[..., Coroutine[Any, Any, Any]]


class Sim:
    """One run of ``fn``: its history and its live (cached) instance."""

    def __init__(
        self,
        fn: WorkflowFn,
        *args: Any,
        run_id: str = "run-1",
        workflow_id: str = "wf-1",
        workflow_name: str = "wf",
        start: float = T0,
        **kwargs: Any,
    ) -> None:
        self.fn = fn
        self.run_id = run_id
        self.workflow_id = workflow_id
        self.workflow_name = workflow_name
        self.now = start
        self.history: list[ev.Event] = []
        self.instance = self.new_instance()
        self.append(
            ev.WorkflowStarted(
                workflow_name=workflow_name,
                workflow_id=workflow_id,
                run_id=run_id,
                input={"args": list(args), "kwargs": dict(kwargs)},
                code_version="x",
            )
        )

    def new_instance(self) -> WorkflowInstance:
        return WorkflowInstance(
            self.fn,
            run_id=self.run_id,
            workflow_id=self.workflow_id,
            workflow_name=self.workflow_name,
        )

    # -- the store's side ----------------------------------------------------
    def append(self, event: E) -> E:
        stored = dataclasses.replace(event, seq=len(self.history) + 1, at=self.now)
        self.history.append(stored)
        return stored

    def advance(self, seconds: float) -> None:
        self.now += seconds

    def complete(self, cmd: int, result: Any = None, *, attempt: int = 1) -> ev.TaskCompleted:
        return self.append(ev.TaskCompleted(cmd=cmd, result=result, attempt=attempt))

    def fail(
        self,
        cmd: int,
        name: str,
        *,
        error_type: str = "ValueError",
        message: str = "boom",
        attempts: int = 1,
    ) -> ev.TaskFailed:
        error = ev.ErrorInfo(type=error_type, message=message)
        return self.append(ev.TaskFailed(cmd=cmd, name=name, error=error, attempts=attempts))

    def fire(self, cmd: int) -> ev.TimerFired:
        return self.append(ev.TimerFired(cmd=cmd))

    def activate(self, *, arriving: Iterable[ev.Event] = ()) -> Activation:
        """Run one live activation and commit it.

        ``arriving`` are inputs appended after the activation read history but
        before it committed (Trap 1): they land between the old commands and
        the new marker, with a seq above the marker's ``saw_upto``.
        """
        instance = self.instance
        unread = [e for e in self.history if e.seq > instance.last_input_seq]
        activation = instance.activate(unread)
        for event in arriving:
            self.append(event)
        if activation.commands or activation.delivered:
            self.append(ev.ActivationCompleted(saw_upto=activation.saw_upto, time=activation.time))
            for command in activation.commands:
                self.append(command)
            instance.position = self.history[-1].seq
        return activation

    # -- reading -------------------------------------------------------------
    def commands(self) -> list[ev.Event]:
        return [e for e in self.history if e.ROLE == "command"]

    def result(self) -> Any:
        done = [e for e in self.history if isinstance(e, ev.WorkflowCompleted)]
        assert len(done) == 1, f"the run has not completed: {keys(self.history)}"
        return done[0].result

    def close(self) -> None:
        self.instance.close()


def commands_of(events: Sequence[ev.Event], kind: type[E]) -> list[E]:
    return [e for e in events if isinstance(e, kind)]


def keys(events: Sequence[ev.Event]) -> list[tuple[str, int, str]]:
    return [e.key() for e in events]


def replay_fresh(
    fn: WorkflowFn,
    history: Sequence[ev.Event],
    *,
    run_id: str = "run-1",
    workflow_id: str = "wf-1",
    workflow_name: str = "wf",
) -> tuple[WorkflowInstance, Activation]:
    """Replay ``history`` on a new instance; return it (still open) and the live tail."""
    instance = WorkflowInstance(
        fn, run_id=run_id, workflow_id=workflow_id, workflow_name=workflow_name
    )
    return instance, instance.activate(list(history))
