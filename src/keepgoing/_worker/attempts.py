"""Running one task attempt: reconcile, call, time out, and describe the outcome."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import inspect
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any

from keepgoing._api.task import TaskDefinition
from keepgoing._history.events import ErrorInfo
from keepgoing._payload import check_json
from keepgoing._runtime.context import TaskContext, task_context
from keepgoing._runtime.instance import error_info
from keepgoing._store.protocol import Store
from keepgoing._store.records import TaskClaim
from keepgoing._volumes.staging import AttemptVolumes, attempt_volumes
from keepgoing._volumes.types import StagedCommit

__all__ = ["AttemptResult", "run_attempt"]


@dataclass(frozen=True)
class AttemptResult:
    ok: bool
    result: Any = None
    error: ErrorInfo | None = None
    reason: str = "error"
    volume_commits: tuple[StagedCommit, ...] = ()


async def run_attempt(
    definition: TaskDefinition[..., Any],
    claim: TaskClaim,
    *,
    worker_id: str,
    remaining: float,
    executor: Executor | None,
    store: Store | None = None,
) -> AttemptResult:
    """Run the attempt within ``remaining`` seconds; never raises for the task's own errors.

    A sync task that overruns keeps its thread, but its late result is discarded.
    With ``store``, volume writes are staged and returned with a successful
    result (to commit with the completion); any other outcome drops them.
    """
    ctx = TaskContext(
        run_id=claim.run_id,
        workflow_id=claim.workflow_id,
        cmd=claim.cmd,
        name=claim.name,
        attempt=claim.attempt,
        worker_id=worker_id,
    )
    staged = None
    if store is not None:
        staged = AttemptVolumes(
            store, run_id=claim.run_id, cmd=claim.cmd, attempt=claim.attempt, task_name=claim.name
        )
    token = task_context.set(ctx)
    volumes_token = attempt_volumes.set(staged)
    try:
        async with asyncio.timeout(max(remaining, 0.0)) as scope:
            try:
                value = await _body(definition, claim, executor)
            except TimeoutError as exc:
                if scope.expired():
                    raise
                return AttemptResult(ok=False, error=error_info(exc), reason="error")
            except Exception as exc:  # the task's own failure: recorded, maybe retried
                return AttemptResult(ok=False, error=error_info(exc), reason="error")
    except TimeoutError:
        message = f"attempt {claim.attempt} exceeded its timeout of {claim.timeout:g}s"
        return AttemptResult(
            ok=False, error=ErrorInfo(type="TimeoutError", message=message), reason="timeout"
        )
    finally:
        # A destroyed attempt closes in another context, where the token is foreign.
        with contextlib.suppress(ValueError):
            task_context.reset(token)
        attempt_volumes.reset(volumes_token)
        # Closing the stages here means a timed-out task's late writes are refused.
        commits = staged.commits() if staged is not None else ()
    try:
        check_json(value, f"the result of task {claim.name!r}")
    except Exception as exc:
        return AttemptResult(ok=False, error=error_info(exc), reason="error")
    return AttemptResult(ok=True, result=value, volume_commits=commits)


async def _body(
    definition: TaskDefinition[..., Any], claim: TaskClaim, executor: Executor | None
) -> Any:
    if definition.reconcile is not None and claim.attempt > 1:
        found = await _call(
            definition.reconcile,
            (f"op-{claim.run_id}-{claim.cmd}", *claim.args),
            claim.kwargs,
            executor,
        )
        if found is not None:
            return found
    return await _call(definition.fn, tuple(claim.args), claim.kwargs, executor)


async def _call(
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    executor: Executor | None,
) -> Any:
    """One adapter for sync and async callables: async on this loop, sync in a thread."""
    if inspect.iscoroutinefunction(fn):
        return await fn(*args, **kwargs)
    loop = asyncio.get_running_loop()
    context = contextvars.copy_context()
    call = functools.partial(context.run, fn, *args, **kwargs)
    result = await loop.run_in_executor(executor, call)
    if inspect.isawaitable(result):
        return await result
    return result
