"""Running one task attempt: reconcile, call, time out, and describe the outcome."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import inspect
from collections.abc import Callable
from typing import Any

from keepgoing import _tracing as tracing
from keepgoing._clock import Clock
from keepgoing._history.events import ErrorInfo
from keepgoing._payload import plain
from keepgoing._runtime.context import TaskContext, task_context
from keepgoing._runtime.instance import error_info
from keepgoing._store.protocol import Store
from keepgoing._store.records import AttemptLog, TaskClaim, TaskOutcome
from keepgoing._store.transitions import NON_RETRYABLE, OVER_BUDGET, UNCERTAIN
from keepgoing._store.volume_records import StagedCommit
from keepgoing._volumes.staging import AttemptVolumes, attempt_volumes
from keepgoing._worker import logs
from keepgoing._worker.redact import redact_error
from keepgoing._worker.threads import TaskThreads
from keepgoing._workflow.retry_policy import not_retried
from keepgoing._workflow.task import TaskDefinition
from keepgoing.errors import BudgetExceededError, UncertainOutcome

__all__ = ["failed_outcome", "run_attempt"]


async def run_attempt(
    definition: TaskDefinition[..., Any],
    claim: TaskClaim,
    *,
    worker_id: str,
    clock: Clock,
    threads: TaskThreads | None,
    store: Store | None = None,
    capture_logs: bool = False,
) -> TaskOutcome:
    """Run the attempt until the claim's deadline and return its outcome, stamped by ``clock``.

    Never raises for the task's own errors: they are the outcome. A sync task that
    overruns keeps its thread (counted as hung by ``threads``), but its late
    result is discarded; with no ``threads``, sync bodies run on the loop's default
    executor. With ``store``, volume writes are staged and returned with
    a successful outcome (to commit with the completion); any other outcome drops them.
    With ``capture_logs``, what the attempt prints and logs goes with its outcome
    (``keepgoing._worker.logs``).
    """
    ctx = TaskContext(
        run_id=claim.run_id,
        workflow_id=claim.workflow_id,
        cmd=claim.cmd,
        name=claim.name,
        attempt=claim.attempt,
        worker_id=worker_id,
        operation=claim.operation_id,
    )
    staged = None
    if store is not None:
        staged = AttemptVolumes(
            store, run_id=claim.run_id, cmd=claim.cmd, attempt=claim.attempt, task_name=claim.name
        )
    value: Any = None
    error: ErrorInfo | None = None  # set when the attempt failed
    # The reason it failed, and for one not retried, the rule that said so.
    why: tuple[str, str | None] = ("error", None)
    capture = _capture() if capture_logs else None
    token = task_context.set(ctx)
    volumes_token = attempt_volumes.set(staged)
    capture_token = logs.current.set(capture)
    spans = contextlib.ExitStack()
    current_span = spans.enter_context(_step_span(claim))
    try:
        async with asyncio.timeout(max(claim.deadline - clock.now(), 0.0)) as scope:
            try:
                value = await _body(definition, claim, threads)
            except TimeoutError as exc:
                if scope.expired():
                    raise
                error, why = error_info(exc), _why(exc, definition)
            except Exception as exc:  # the task's own failure: recorded, maybe retried
                error, why = error_info(exc), _why(exc, definition)
            except BaseException as exc:
                # sys.exit(), SystemExit, KeyboardInterrupt raised by the task's code are
                # its failure too, not the worker's; only the engine's own cancellation
                # (a timeout, a lost lease, a shutdown) goes on up.
                if _engine_signal(exc):
                    raise
                error, why = error_info(exc), _why(exc, definition)
    except TimeoutError:
        message = f"attempt {claim.attempt} exceeded its timeout of {claim.timeout:g}s"
        error, why = ErrorInfo(type="TimeoutError", message=message), ("timeout", None)
    finally:
        # A destroyed attempt closes in another context, where the token is foreign.
        with contextlib.suppress(ValueError):
            task_context.reset(token)
        attempt_volumes.reset(volumes_token)
        with contextlib.suppress(ValueError):
            logs.current.reset(capture_token)
        # Closing the stages here means a timed-out task's late writes are refused.
        commits = staged.commits() if staged is not None else ()
        if error is not None:
            tracing.mark_error(current_span, f"{error.type}: {error.message}")
        spans.close()
    if error is None:
        try:
            # The decoded copy is what the workflow gets, live or in replay: a tuple
            # becomes a list and the task's objects are never shared with it.
            value = plain(value, f"task {claim.name!r} returned a value no store can carry: result")
        except Exception as exc:  # a failed attempt, counted against retries
            error = error_info(exc)
    # An attempt that printed nothing stores nothing: no extra row on the hot path.
    log = _log(capture, claim, worker_id, clock) if capture is not None and capture.size else None
    if error is None:
        return _outcome(claim, worker_id, clock, result=value, volume_commits=commits, logs=log)
    return _outcome(claim, worker_id, clock, error=error, reason=why[0], cause=why[1], logs=log)


def failed_outcome(
    claim: TaskClaim, worker_id: str, clock: Clock, exc: BaseException
) -> TaskOutcome:
    """The outcome of an attempt whose outcome could not be made otherwise (``exc``
    escaped :func:`run_attempt`): a failure of the task, counted against ``retries``,
    rather than an attempt nobody reports, which would be handed back forever."""
    error = error_info(exc)
    message = f"keepgoing could not record the attempt's own outcome: {error.message}"
    described = ErrorInfo(type=error.type, message=message, traceback=error.traceback)
    return _outcome(claim, worker_id, clock, error=described, reason=_reason(exc))


def _capture() -> logs.Capture:
    """A capture of what the attempt prints and logs (the router installed first)."""
    logs.install()
    return logs.Capture()


def _step_span(claim: TaskClaim) -> contextlib.AbstractContextManager[Any]:
    """The attempt's trace span, or nothing when tracing is off."""
    if not tracing.enabled():
        return contextlib.nullcontext()
    return tracing.span(
        f"step {claim.name}",
        {
            "keepgoing.run_id": claim.run_id,
            "keepgoing.workflow_id": claim.workflow_id,
            "keepgoing.step": claim.cmd,
            "keepgoing.task": claim.name,
            "keepgoing.attempt": claim.attempt,
        },
    )


def _log(capture: logs.Capture, claim: TaskClaim, worker_id: str, clock: Clock) -> AttemptLog:
    text, size, truncated = capture.finish()
    return AttemptLog(
        run_id=claim.run_id,
        cmd=claim.cmd,
        attempt=claim.attempt,
        worker_id=worker_id,
        at=clock.now(),
        text=text,
        size=size,
        truncated=truncated,
    )


def _outcome(
    claim: TaskClaim,
    worker_id: str,
    clock: Clock,
    *,
    result: Any = None,
    error: ErrorInfo | None = None,
    reason: str = "error",
    cause: str | None = None,
    volume_commits: tuple[StagedCommit, ...] = (),
    logs: AttemptLog | None = None,
) -> TaskOutcome:
    """The outcome of ``claim``'s attempt, stamped now: it returned ``result`` unless ``error``."""
    return TaskOutcome(
        run_id=claim.run_id,
        cmd=claim.cmd,
        fence=claim.fence,
        worker_id=worker_id,
        attempt=claim.attempt,
        started_at=claim.started_at,
        now=clock.now(),
        ok=error is None,
        result=result,
        error=None if error is None else redact_error(error),
        reason=reason,
        cause=cause,
        volume_commits=volume_commits,
        logs=logs,
    )


def _reason(exc: BaseException) -> str:
    """Why the attempt failed: UncertainOutcome is never retried (the step goes to review),
    also when it comes wrapped in an exception group (an ``asyncio.TaskGroup``, say),
    however deep, beside other errors: one write that may have happened is enough.
    A gateway key over its limit (BudgetExceededError) fails the step without a retry."""
    if _holds_uncertain(exc, 0):
        return UNCERTAIN
    return OVER_BUDGET if isinstance(exc, BudgetExceededError) else "error"


def _why(exc: BaseException, definition: TaskDefinition[..., Any]) -> tuple[str, str | None]:
    """:func:`_reason`, then the task's retry rules (``retry_policy``) on the exception
    itself: the reason, and for an attempt not retried, the rule that said so."""
    reason = _reason(exc)
    cause = not_retried(exc, definition.retry_on, definition.give_up_on)
    if reason == UNCERTAIN or cause is None:
        return reason, None
    return NON_RETRYABLE, cause


def _holds_uncertain(exc: BaseException, depth: int) -> bool:
    if isinstance(exc, UncertainOutcome):
        return True
    if not isinstance(exc, BaseExceptionGroup) or depth > 100:
        return False
    inner = exc.exceptions  # the tuple the group was made with: no user method runs
    return any(_holds_uncertain(e, depth + 1) for e in inner if isinstance(e, BaseException))


def _engine_signal(exc: BaseException) -> bool:
    """True for a cancellation the engine asked for, which must reach the engine."""
    if isinstance(exc, GeneratorExit):
        return True
    if isinstance(exc, asyncio.CancelledError):
        task = asyncio.current_task()
        return task is None or task.cancelling() > 0
    return False


async def _body(
    definition: TaskDefinition[..., Any], claim: TaskClaim, threads: TaskThreads | None
) -> Any:
    # A reviewed retry (its own operation id set) looks its operation up on attempt 1 too.
    if definition.reconcile is not None and (claim.attempt > 1 or claim.operation_id):
        found = await _call(
            definition.reconcile,
            (claim.operation_id or f"op-{claim.run_id}-{claim.cmd}", *claim.args),
            claim.kwargs,
            threads,
        )
        if found is not None:
            return found
    return await _call(definition.fn, tuple(claim.args), claim.kwargs, threads)


async def _call(
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    threads: TaskThreads | None,
) -> Any:
    """One adapter for sync and async callables: async on this loop, sync in a thread."""
    if inspect.iscoroutinefunction(fn):
        return await fn(*args, **kwargs)
    context = contextvars.copy_context()
    call = functools.partial(context.run, fn, *args, **kwargs)
    if threads is None:
        result = await asyncio.get_running_loop().run_in_executor(None, call)
    else:
        running = threads.start(call)
        try:
            result = await running.future
        finally:
            if not running.returned:
                threads.abandon(running)  # its attempt ended: the thread is hung
    if inspect.isawaitable(result):
        return await result
    return result
