"""A workflow instance: history in, commands out.

``WorkflowInstance.activate(events)`` takes the history after the instance's
position. For each ``ActivationCompleted(saw_upto)`` marker it replays: it
delivers every undelivered input with ``seq <= saw_upto`` in seq order, runs
the loop until it settles, and checks the commands produced against the
command events recorded after the marker, by (kind, sequence, name). Inputs
after the last marker are then delivered live, and the new commands are
returned for the caller to commit. A mismatch raises
:class:`~keepgoing.errors.NondeterminismError` with a readable diff.

Patches (``keepgoing.patched``): a ``PatchMarked`` event is recorded with an
activation's commands but left out of the match. While an activation is
replayed, ``patched(change_id)`` is True only if that activation recorded the
marker or an earlier one did (the run took the new branch when it first asked,
even at a call site later code no longer has); live, it is True and writes the
marker unless the history holds one already. The first answer for a change id
holds for the rest of the run (Temporal's memoized ``patched``).

No I/O happens here: no store, no clock, no network.
"""

from __future__ import annotations

import asyncio
import random as _random
import traceback
import uuid as _uuid
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any

from keepgoing._history import events as ev
from keepgoing._payload import plain, safe_text
from keepgoing._runtime import prefix
from keepgoing._runtime.loop import WorkflowLoop
from keepgoing._runtime.waits import ContinueAsNew, Waits
from keepgoing.errors import NondeterminismError, TaskFailedError

__all__ = ["Activation", "TaskSpec", "WorkflowInstance", "error_info"]

WorkflowFn = Callable[..., Coroutine[Any, Any, Any]]


@dataclass(frozen=True)
class TaskSpec:
    """What a workflow asks for when it schedules a task."""

    name: str
    args: list[Any]
    kwargs: dict[str, Any]
    retries: int = 0
    retry_delay: float | None = None
    timeout: float = 600.0
    max_worker_losses: int = 3
    image: str | None = None
    queue: str | None = None
    operation_id: str | None = None
    #: The task's positional parameter names: how a reused step's differing
    #: argument is named (never recorded).
    params: tuple[str, ...] = ()
    limits: dict[str, Any] | None = None


@dataclass
class Activation:
    """The outcome of one live activation: commands to commit and what they saw."""

    commands: list[ev.Event] = field(default_factory=list)
    saw_upto: int = 0
    time: float = 0.0
    delivered: int = 0


def error_info(exc: BaseException) -> ev.ErrorInfo:
    """How ``exc`` is recorded: its type, message and traceback, whatever it does.

    A task's exception is the task's own object: its ``__str__`` may raise (even
    ``SystemExit``), return something that is not text, or its class may carry an
    odd ``__module__``. Each part that cannot be had is replaced by a placeholder
    naming why, so describing a failure never fails.
    """
    kind = type(exc)
    name = _type_name(kind)
    if isinstance(exc, TaskFailedError):
        name = "keepgoing.errors.TaskFailedError"
    message = _described(lambda: str(exc), f"<str() of the {name} failed")
    text = _described(
        lambda: "".join(traceback.format_exception(exc)).rstrip(),
        "",
    )
    if not text:  # formatting it whole failed: its frames, then the message found above
        frames = _described(lambda: "".join(traceback.format_tb(exc.__traceback__)), "")
        text = f"Traceback (most recent call last):\n{frames}{name}: {message}"
    # A message may quote bad input (a lone surrogate, say): the failure is still recorded.
    return ev.ErrorInfo(type=safe_text(name), message=message, traceback=text)


def _type_name(kind: type) -> str:
    qualname = kind.__qualname__  # always a str: type() refuses anything else
    try:
        module = kind.__module__  # a metaclass may make even this raise
    except BaseException:
        module = None
    if type(module) is not str:
        module = "<unknown module>"
    return qualname if module == "builtins" else f"{module}.{qualname}"


def _described(make: Callable[[], object], placeholder: str) -> str:
    """``make()`` as plain storable text, or ``placeholder`` with the reason it failed."""
    try:
        text = make()
        if not isinstance(text, str):
            raise TypeError(f"it returned {type(text).__qualname__}, not str")
        text = str.__str__(text)  # a str subclass's own methods are never called
        return safe_text(text)
    except BaseException as exc:
        try:
            why = type(exc).__qualname__
        except BaseException:
            why = "an exception"
        return f"{placeholder}: {why}>" if placeholder else ""


class WorkflowInstance:
    """The live state of one run's workflow coroutine."""

    def __init__(
        self,
        fn: WorkflowFn,
        *,
        run_id: str,
        workflow_id: str,
        workflow_name: str,
    ) -> None:
        self.fn = fn
        self.run_id = run_id
        self.workflow_id = workflow_id
        self.workflow_name = workflow_name
        self.loop = WorkflowLoop(self)  # type: ignore[abstract]
        # Seeded by the whole run id (a str seed is hashed with SHA-512, stable across
        # processes): a 32-bit seed made uuid4() repeat between runs after ~100k runs.
        self.rng = _random.Random(run_id)
        self.position = 0  # the last history seq this instance has consumed
        self.last_input_seq = 0  # the last input seq delivered
        self.fence = 0  # the run's fence after this instance's last commit (set by the worker)
        self.done = False
        self.failure: BaseException | None = None
        self._cmd = 0
        self._pending: list[ev.Event] = []
        self._tasks: dict[int, tuple[str, asyncio.Future[Any]]] = {}
        self._buffer: list[ev.Event] = []
        self._main: asyncio.Task[None] | None = None
        self.waits = Waits(self.loop.create_future)
        self.parent_workflow_id: str | None = None
        self.started_at: float | None = None  # when the run started (its WorkflowStarted)
        self.cancel_reason: str | None = None
        self.local = False  # a direct in-process run: no orchestrator to send messages
        self.patches: dict[str, bool] = {}  # change id -> the branch this run takes
        self._replaying = False  # while an activation recorded in history is replayed
        #: The change ids whose marker the history holds, up to the activation replayed.
        self._recorded: set[str] = set()
        #: The prefix this run reuses from its origin (its ``WorkflowStarted`` says),
        #: held to the arguments it recorded while it replays (``prefix.py``).
        self.reused: prefix.Reused | None = None
        self._params: dict[str, tuple[str, ...]] = {}  # task name -> positional names

    # -- commands issued by workflow code ----------------------------------
    def _next_cmd(self) -> int:
        self._cmd += 1
        return self._cmd

    def _emit(self, command: ev.Event) -> None:
        if not self.done:
            self._pending.append(command)

    def start_timer(self, fire_at: float) -> int:
        cmd = self._next_cmd()
        self._emit(ev.TimerStarted(cmd=cmd, fire_at=fire_at))
        return cmd

    def cancel_timer(self, cmd: int) -> None:
        self._emit(ev.TimerCancelled(cmd=cmd))

    def schedule_task(self, spec: TaskSpec) -> tuple[int, asyncio.Future[Any]]:
        cmd = self._next_cmd()
        if spec.params:
            self._params[spec.name] = spec.params
        self._emit(
            ev.TaskScheduled(
                cmd=cmd,
                name=spec.name,
                args=spec.args,
                kwargs=spec.kwargs,
                retries=spec.retries,
                retry_delay=spec.retry_delay,
                timeout=spec.timeout,
                max_worker_losses=spec.max_worker_losses,
                image=spec.image,
                task_queue=spec.queue,
                operation_id=spec.operation_id,
                limits=spec.limits,
            )
        )
        future: asyncio.Future[Any] = self.loop.create_future()
        self._tasks[cmd] = (spec.name, future)
        future.add_done_callback(lambda f: self._task_future_done(cmd, f))
        return cmd, future

    def _task_future_done(self, cmd: int, future: asyncio.Future[Any]) -> None:
        # The workflow stopped waiting (cancelled, or a wait_for timed out) while the
        # task was still open: tell its attempt to stop.
        if future.cancelled() and self._tasks.pop(cmd, None) is not None:
            self._emit(ev.TaskCancelRequested(cmd=cmd))

    def command(self, make: Callable[[int], ev.Event]) -> int:
        """Issue the command ``make(cmd)`` with the next sequence number."""
        cmd = self._next_cmd()
        self._emit(make(cmd))
        return cmd

    def mark(self, marker: ev.Event) -> None:
        """Record ``marker`` (one of ``events.UNMATCHED``) with this activation's commands:
        it takes no command number and replay never matches it."""
        if not isinstance(marker, ev.UNMATCHED):
            raise TypeError(f"{type(marker).__name__} is not a marker")
        self._emit(marker)

    def patched(self, change_id: str) -> bool:
        """True if this run takes the new branch of ``change_id`` (see the module doc)."""
        known = self.patches.get(change_id)
        if known is not None:
            return known
        if self._replaying:
            taken = change_id in self._recorded
        else:
            taken = True
            if change_id not in self._recorded:
                self._emit(ev.PatchMarked(change_id=change_id))
                self._recorded.add(change_id)
        self.patches[change_id] = taken
        return taken

    def deprecate_patch(self, change_id: str) -> None:
        """The old branch of ``change_id`` is gone: mark live runs, accept any history."""
        known = change_id in self.patches or change_id in self._recorded
        if not self._replaying and not known:
            self._emit(ev.PatchMarked(change_id=change_id, deprecated=True))
            self._recorded.add(change_id)
        self.patches.setdefault(change_id, True)

    def random(self) -> float:
        return self.rng.random()

    def uuid4(self) -> _uuid.UUID:
        return _uuid.UUID(int=self.rng.getrandbits(128), version=4)

    # -- activation ----------------------------------------------------------
    def activate(self, events: Sequence[ev.Event]) -> Activation:
        """Consume ``events`` (history after :attr:`position`) and return new commands."""
        if self.position == 0 and self.reused is None:
            self.reused = prefix.reused(events)
        index = 0
        while index < len(events):
            event = events[index]
            index += 1
            if event.seq <= self.position:
                # Consumed already (our own marker and commands), unless it is an
                # input that arrived while our last activation was running.
                fresh = event.ROLE == "input" and event.seq > self.last_input_seq
                if fresh and all(e.seq != event.seq for e in self._buffer):
                    self._buffer.append(event)
                continue
            self.position = event.seq
            if event.ROLE == "input":
                self._buffer.append(event)
            elif isinstance(event, ev.ActivationCompleted):
                recorded: list[ev.Event] = []
                while index < len(events) and events[index].ROLE == "command":
                    recorded.append(events[index])
                    index += 1
                self._replay_group(event, recorded)
                if recorded:
                    self.position = max(self.position, recorded[-1].seq)
        return self._activate_live()

    def _replay_group(self, marker: ev.ActivationCompleted, recorded: list[ev.Event]) -> None:
        self._recorded.update(c.change_id for c in recorded if isinstance(c, ev.PatchMarked))
        self._replaying = True
        try:
            self._deliver_upto(marker.saw_upto, marker.time)
        finally:
            self._replaying = False
        produced, self._pending = self._pending, []
        recorded = [c for c in recorded if not isinstance(c, ev.UNMATCHED)]
        produced = [c for c in produced if not isinstance(c, ev.UNMATCHED)]
        want = [c.key() for c in recorded]
        got = [c.key() for c in produced]
        reused = self.reused if self.reused and marker.seq <= self.reused.upto else None
        if want != got:
            if reused is not None:
                diff = _diff(marker, recorded, produced, tail="")
                raise prefix.key_mismatch(reused, recorded, produced, diff)
            raise NondeterminismError(_diff(marker, recorded, produced))
        if reused is not None:
            found = prefix.first_difference(recorded, produced, self._names)
            if found is not None:
                raise prefix.argument_mismatch(found, reused)

    def _names(self, task: str) -> tuple[str, ...]:
        return self._params.get(task, ())

    def _activate_live(self) -> Activation:
        self._buffer.sort(key=lambda e: e.seq)
        upto = max((e.seq for e in self._buffer), default=self.last_input_seq)
        times = [e.at for e in self._buffer]
        delivered = len(self._buffer)
        now = max(times) if times else self.loop.time()
        self._deliver_upto(upto, now)
        commands, self._pending = self._pending, []
        return Activation(commands=commands, saw_upto=upto, time=now, delivered=delivered)

    def _deliver_upto(self, saw_upto: int, now: float) -> None:
        self.loop.set_time(now)
        ready = [e for e in self._buffer if e.seq <= saw_upto]
        self._buffer = [e for e in self._buffer if e.seq > saw_upto]
        for event in sorted(ready, key=lambda e: e.seq):
            self._apply(event)
            self.last_input_seq = max(self.last_input_seq, event.seq)
        self.loop.run_until_settled()

    def _apply(self, event: ev.Event) -> None:
        if self.waits.deliver(event):
            return
        if isinstance(event, ev.WorkflowStarted):
            if event.seed is not None:  # a resumed or forked run draws its origin's values
                self.rng = _random.Random(event.seed)
            self.parent_workflow_id = event.parent_workflow_id
            self.started_at = event.at
            self._main = self.loop.create_task(self._run_main(event.input))
        elif isinstance(event, ev.CancelRequested):
            self.cancel_reason = event.reason or "cancelled"
            # Scheduled, not immediate: a main task that has not taken its first
            # step yet would otherwise die before its try/finally exists.
            self.loop.call_soon(self._cancel_main)
        elif isinstance(event, ev.TaskCompleted):
            self._resolve(event.cmd, result=event.result)
        elif isinstance(event, ev.TaskFailed):
            name = self._tasks.get(event.cmd, (event.name, None))[0]
            error = TaskFailedError(
                name, event.error.type, event.error.message, event.attempts, event.reason
            )
            self._resolve(event.cmd, error=error)
        elif isinstance(event, ev.TimerFired):
            self.loop.fire_timer(event.cmd)

    def _resolve(self, cmd: int, *, result: Any = None, error: BaseException | None = None) -> None:
        entry = self._tasks.pop(cmd, None)
        if entry is None or entry[1].done():
            return
        if error is not None:
            entry[1].set_exception(error)
        else:
            entry[1].set_result(result)

    def _cancel_main(self) -> None:
        if self._main is not None and not self._main.done():
            self._main.cancel(self.cancel_reason)

    async def _run_main(self, inputs: dict[str, Any]) -> None:
        try:
            result = await self.fn(*inputs.get("args", []), **inputs.get("kwargs", {}))
            result = plain(result, f"the result of workflow {self.workflow_name!r}")
        except ContinueAsNew as again:
            self._emit(ev.WorkflowContinuedAsNew(input=again.inputs))
        except asyncio.CancelledError as exc:
            if self.cancel_reason is not None:
                self._emit(ev.WorkflowCancelled(reason=self.cancel_reason))
            else:
                # The workflow cancelled and awaited one of its own tasks: its failure.
                self.failure = exc
                self._emit(ev.WorkflowFailed(error=error_info(exc)))
        except Exception as exc:  # its failure is data, not a crash
            self.failure = exc
            self._emit(ev.WorkflowFailed(error=error_info(exc)))
        else:
            self._emit(ev.WorkflowCompleted(result=result))
        self.done = True

    def close(self) -> None:
        """Evict: close every coroutine of this instance so nothing runs later in GC."""
        self.done = True
        previous = asyncio.events._get_running_loop()
        asyncio.events._set_running_loop(self.loop)
        try:
            for task in self.loop.tasks():
                coro = task.get_coro()
                try:
                    if coro is not None and hasattr(coro, "close"):
                        coro.close()
                except BaseException:  # a finally block that awaits; nothing to save
                    pass
        finally:
            asyncio.events._set_running_loop(previous)
        self.loop.close()


def _describe(command: ev.Event) -> str:
    kind, cmd, name = command.key()
    return f"{kind} #{cmd} {name}".rstrip() if cmd else kind


_BLOCKED = "the run is blocked; deploy code that replays this history to resume it"


def _diff(
    marker: ev.ActivationCompleted,
    recorded: list[ev.Event],
    produced: list[ev.Event],
    *,
    tail: str = _BLOCKED,
) -> str:
    lines = [
        f"workflow code no longer matches its history at the activation recorded at seq "
        f"{marker.seq} (inputs up to seq {marker.saw_upto}):",
        f"  {'history':<40} code now",
    ]
    for i in range(max(len(recorded), len(produced))):
        left = _describe(recorded[i]) if i < len(recorded) else "(nothing)"
        right = _describe(produced[i]) if i < len(produced) else "(nothing)"
        flag = "  " if left == right else "! "
        lines.append(f"{flag}{left:<40} {right}")
    if tail:
        lines.append(tail)
    return "\n".join(lines)
