"""``@task``: a step of a workflow, checkpointed, retried and timed out on its own."""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Awaitable, Callable, Coroutine, Generator
from typing import Any, Generic, ParamSpec, Protocol, TypeVar, overload

from keepgoing._durations import Duration, parse_duration
from keepgoing._limits import (
    Concurrency,
    RateLimit,
    check_concurrency,
    check_rate_limit,
    resolve,
)
from keepgoing._runtime.context import current_instance
from keepgoing._runtime.instance import TaskSpec
from keepgoing._workflow._callables import (
    bind_arguments,
    check_call,
    origin_of,
    positional_names,
)
from keepgoing._workflow.registry import registry
from keepgoing._workflow.retry_policy import ErrorTypes, check_overlap, exception_types
from keepgoing._workflow.review import UNCERTAIN, settle_uncertain
from keepgoing.errors import TaskFailedError

__all__ = ["TaskDefinition", "TaskHandle", "task"]

P = ParamSpec("P")
R = TypeVar("R")

DEFAULT_TIMEOUT = "10m"


class TaskHandle(Generic[R]):
    """A task started with :meth:`TaskDefinition.submit`; await it for the result.

    When the step's outcome is uncertain (its attempt raised ``UncertainOutcome``),
    awaiting it waits for a reviewer's decision (``keepgoing._workflow.review``).
    """

    def __init__(
        self,
        name: str,
        cmd: int,
        future: asyncio.Future[Any],
        review: Callable[[TaskFailedError], Coroutine[Any, Any, Any]] | None = None,
    ) -> None:
        self.name = name
        self.cmd = cmd
        self._future = future
        self._review = review
        self._settling: asyncio.Future[Any] | None = None

    def __await__(self) -> Generator[Any, None, R]:
        try:
            result: R = yield from self._future.__await__()
        except TaskFailedError as exc:
            if exc.reason != UNCERTAIN or self._review is None:
                raise
            if self._settling is None:  # one review, however often the handle is awaited
                self._settling = asyncio.ensure_future(self._review(exc))
            result = yield from self._settling.__await__()
        return result

    def done(self) -> bool:
        return self._future.done()

    def result(self) -> R:
        """The result if the task has finished (raises ``InvalidStateError`` otherwise)."""
        value: R = self._future.result()
        return value

    def __repr__(self) -> str:
        state = "done" if self.done() else "pending"
        return f"<TaskHandle {self.name} #{self.cmd} {state}>"


class TaskDefinition(Generic[P, R]):
    """What ``@task`` returns. Call it like the function; it returns a coroutine.

    Inside a workflow the call is a durable step; outside it calls ``fn``.
    """

    def __init__(
        self,
        fn: Callable[P, R] | Callable[P, Awaitable[R]],
        *,
        name: str | None = None,
        retries: int = 0,
        retry_delay: Duration | None = None,
        timeout: Duration = DEFAULT_TIMEOUT,
        description: str | None = None,
        image: object | None = None,
        reconcile: Callable[..., Any] | None = None,
        max_worker_losses: int = 3,
        retry_on: object = None,
        give_up_on: object = None,
        concurrency: int | str | Concurrency | None = None,
        rate_limit: str | RateLimit | None = None,
    ) -> None:
        if not callable(fn):
            raise TypeError(f"@task needs a function, not {type(fn).__name__}")
        self.name = name or fn.__name__
        self.retries = _non_negative_int(retries, "retries", self.name)
        self.max_worker_losses = _non_negative_int(
            max_worker_losses, "max_worker_losses", self.name
        )
        what = f"retry_delay of task {self.name!r}"
        self.retry_delay = None if retry_delay is None else parse_duration(retry_delay, what=what)
        self.timeout = parse_duration(timeout, what=f"timeout of task {self.name!r}")
        if self.timeout <= 0:
            raise ValueError(f"timeout of task {self.name!r} must be longer than zero")
        if reconcile is not None and not callable(reconcile):
            raise TypeError(f"reconcile of task {self.name!r} must be callable")
        self.retry_on: ErrorTypes | None = (
            None if retry_on is None else exception_types(retry_on, "retry_on", self.name)
        )
        self.give_up_on: ErrorTypes | None = (
            None if give_up_on is None else exception_types(give_up_on, "give_up_on", self.name)
        )
        check_overlap(self.retry_on, self.give_up_on, self.name)
        where = f"task {self.name!r}"
        self.concurrency = check_concurrency(concurrency, fn, where=where)
        self.rate_limit = check_rate_limit(rate_limit, fn, where=where)
        self.fn = fn
        self.description = description or inspect.getdoc(fn)
        self.image = image
        self.reconcile = reconcile
        self.is_async = inspect.iscoroutinefunction(fn)
        self.params = positional_names(fn)
        self.origin = origin_of(fn)
        functools.update_wrapper(self, fn)
        registry.add_task(self)  # type: ignore[arg-type]

    @property
    def image_ref(self) -> str | None:
        if self.image is None:
            return None
        return str(getattr(self.image, "hash", None) or self.image)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> Coroutine[Any, Any, R]:
        if current_instance() is None:
            check_call(self.fn, args, kwargs, f"task {self.name!r}")  # fail here, not at await
            return self._call_direct(*args, **kwargs)
        handle = self.submit(*args, **kwargs)
        return _await_handle(handle)

    async def _call_direct(self, *args: Any, **kwargs: Any) -> R:
        if self.is_async:
            result: R = await self.fn(*args, **kwargs)  # type: ignore[misc]
            return result
        return self.fn(*args, **kwargs)  # type: ignore[return-value]

    def submit(self, *args: P.args, **kwargs: P.kwargs) -> TaskHandle[R]:
        """Start the task now without waiting for it; await the handle for its result.

        Raises:
            RuntimeError: outside a workflow.
            PayloadError: an argument is not JSON (the message names it).
        """
        instance = current_instance()
        if instance is None:
            raise RuntimeError(
                f"{self.name}.submit() works only inside a workflow; outside one, "
                f"call `await {self.name}(...)` instead"
            )
        plain_args, plain_kwargs = bind_arguments(self.fn, args, kwargs, f"task {self.name!r}")
        spec = TaskSpec(
            name=self.name,
            args=plain_args,
            kwargs=plain_kwargs,
            retries=self.retries,
            retry_delay=self.retry_delay,
            timeout=self.timeout,
            max_worker_losses=self.max_worker_losses,
            image=self.image_ref,
            queue=registry.task_queues.get(self.name),
            limits=resolve(
                self.name,
                self.concurrency,
                self.rate_limit,
                self.fn,
                tuple(plain_args),
                plain_kwargs,
            ),
            params=self.params,
        )
        cmd, future = instance.schedule_task(spec)
        review = functools.partial(settle_uncertain, instance, spec, cmd)
        return TaskHandle(self.name, cmd, future, review)

    def __repr__(self) -> str:
        return f"<task {self.name}>"


async def _await_handle(handle: TaskHandle[R]) -> R:
    return await handle


def _non_negative_int(value: object, what: str, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{what} of task {name!r} must be a non-negative int, not {value!r}")
    return value


class _TaskDecorator(Protocol):
    """What ``@task(...)`` with options returns: async functions keep their result type."""

    @overload
    def __call__(self, fn: Callable[P, Awaitable[R]], /) -> TaskDefinition[P, R]: ...
    @overload
    def __call__(self, fn: Callable[P, R], /) -> TaskDefinition[P, R]: ...


@overload
def task(fn: Callable[P, Awaitable[R]], /) -> TaskDefinition[P, R]: ...
@overload
def task(fn: Callable[P, R], /) -> TaskDefinition[P, R]: ...
@overload
def task(
    fn: None = None,
    /,
    *,
    name: str | None = None,
    retries: int = 0,
    retry_delay: Duration | None = None,
    timeout: Duration = DEFAULT_TIMEOUT,
    description: str | None = None,
    image: object | None = None,
    reconcile: Callable[..., Any] | None = None,
    max_worker_losses: int = 3,
    retry_on: type[BaseException] | tuple[type[BaseException], ...] | None = None,
    give_up_on: type[BaseException] | tuple[type[BaseException], ...] | None = None,
    concurrency: int | str | Concurrency | None = None,
    rate_limit: str | RateLimit | None = None,
) -> _TaskDecorator: ...


def task(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    retries: int = 0,
    retry_delay: Duration | None = None,
    timeout: Duration = DEFAULT_TIMEOUT,
    description: str | None = None,
    image: object | None = None,
    reconcile: Callable[..., Any] | None = None,
    max_worker_losses: int = 3,
    retry_on: type[BaseException] | tuple[type[BaseException], ...] | None = None,
    give_up_on: type[BaseException] | tuple[type[BaseException], ...] | None = None,
    concurrency: int | str | Concurrency | None = None,
    rate_limit: str | RateLimit | None = None,
) -> Any:
    """Make a function a workflow step.

    Args:
        name: registered name (default: the function's name); unique per process.
        retries: retries after the first failed attempt (``retries=2``: up to 3 attempts).
        retry_delay: first backoff interval; doubles per failure, capped, with jitter.
        timeout: limit per attempt (default ten minutes).
        description: shown in the CLI and UI (default: the docstring).
        image: the environment the task runs in; stored and shown.
        reconcile: ``lookup(operation_id, *args, **kwargs)`` called before a retry;
            a non-None return completes the step without running it again.
        max_worker_losses: attempts lost with their worker that are retried,
            counted apart from ``retries``.
        retry_on: the exception types that are retried; any other error fails
            the step at once (default: every error is retried).
        give_up_on: exception types that are never retried. A
            ``NonRetryableError`` (or a subclass) is never retried either.
        concurrency: at most this many attempts at once across every worker:
            an int, ``Concurrency(n, key="arg")`` (per value of an argument),
            or the name of a limit made with ``keepgoing.limits.define``.
        rate_limit: a token bucket shared by every worker: ``"10/s"``,
            ``RateLimit("100/m", key="arg", burst=10)`` or a defined limit's name.

    Raises:
        InvalidDurationError: a malformed ``retry_delay`` or ``timeout``.
        TypeError: ``retry_on``/``give_up_on`` are not exception types, or overlap.
        InvalidLimitError: a limit that cannot be enforced (names the problem).
        DuplicateNameError: the name is already used by a task defined elsewhere.
    """

    def wrap(inner: Callable[..., Any]) -> TaskDefinition[..., Any]:
        return TaskDefinition(
            inner,
            name=name,
            retries=retries,
            retry_delay=retry_delay,
            timeout=timeout,
            description=description,
            image=image,
            reconcile=reconcile,
            max_worker_losses=max_worker_losses,
            retry_on=retry_on,
            give_up_on=give_up_on,
            concurrency=concurrency,
            rate_limit=rate_limit,
        )

    return wrap(fn) if fn is not None else wrap
