"""``@workflow``: an ``async def`` that orchestrates tasks, made durable."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any, Generic, ParamSpec, TypeVar, overload

from keepgoing._durations import Duration, parse_duration
from keepgoing._limits import Concurrency, key_value
from keepgoing._runtime.context import current_instance
from keepgoing._workflow._callables import bind_arguments, code_version, origin_of
from keepgoing._workflow.registry import registry
from keepgoing._workflow.run_flow import run_flow
from keepgoing._workflow.runner import direct_runner
from keepgoing._workflow.schedule import Schedule, declared_schedules
from keepgoing.errors import PayloadError

__all__ = ["WorkflowDefinition", "workflow"]

P = ParamSpec("P")
R = TypeVar("R")


class WorkflowDefinition(Generic[P, R]):
    """What ``@workflow`` returns.

    Awaiting a call runs the workflow in-process (or inline inside another
    workflow); :class:`~keepgoing.Client` runs it durably by name.
    """

    def __init__(
        self,
        fn: Callable[P, Coroutine[Any, Any, R]],
        *,
        name: str | None = None,
        description: str | None = None,
        owner: str | None = None,
        schedule: str | Schedule | Sequence[Schedule] | None = None,
        schedule_timezone: str | None = None,
        retention: Duration | None = None,
        concurrency: int | Concurrency | None = None,
        singleton: str | None = None,
        on_conflict: str | None = None,
    ) -> None:
        if not inspect.iscoroutinefunction(fn):
            raise TypeError(
                f"@workflow needs an `async def` function; {getattr(fn, '__qualname__', fn)!r} "
                "is not one"
            )
        self.fn = fn
        self.name = name or fn.__name__
        self.description = description or inspect.getdoc(fn)
        self.owner = owner
        #: The schedules declared with it (``@workflow(schedule=...)``).
        self.schedules = declared_schedules(self.name, schedule, schedule_timezone)
        #: Seconds its ended runs are kept (None: the store's default policy).
        self.retention = None if retention is None else parse_duration(retention, what="retention")
        #: Its run-flow spec: the concurrency limit or singleton key of its open runs.
        self.flow, self.flow_key_fn = run_flow(fn, self.name, concurrency, singleton, on_conflict)
        self.origin = origin_of(fn)
        self.code_version = code_version(fn)
        self.__doc__ = fn.__doc__
        self.__name__ = self.name
        self.__wrapped__ = fn
        registry.add_workflow(self)  # type: ignore[arg-type]

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> Coroutine[Any, Any, R]:
        if current_instance() is not None:
            return self.fn(*args, **kwargs)  # inline inside another workflow
        inputs = self.bind(args, kwargs)
        return direct_runner()(self, inputs)

    def bind(self, args: tuple[Any, ...] | list[Any], kwargs: Mapping[str, Any]) -> dict[str, Any]:
        """Check the inputs against the signature; return the stored input document."""
        plain_args, plain_kwargs = bind_arguments(self.fn, args, kwargs, f"workflow {self.name!r}")
        return {"args": plain_args, "kwargs": plain_kwargs}

    def bind_input(self, value: object) -> dict[str, Any]:
        """Inputs given as one value: a mapping of parameter names, a list, or None."""
        if value is None:
            return self.bind((), {})
        if isinstance(value, Mapping):
            bad = [k for k in value if not isinstance(k, str)]
            if bad:
                raise PayloadError(f"input keys of workflow {self.name!r} must be str: {bad!r}")
            return self.bind((), dict(value))
        if isinstance(value, list | tuple):
            return self.bind(tuple(value), {})
        raise PayloadError(
            f"input of workflow {self.name!r} must be a mapping of parameter names to values "
            f"(or a list of positional values), not {type(value).__name__}"
        )

    def flow_key(self, document: Mapping[str, Any]) -> str | None:
        """The slot key of a start with stored input ``document``, computed with the
        code when the key is a callable (None: no callable key to compute)."""
        if self.flow is None or not self.flow.callable_key:
            return None
        args, kwargs = tuple(document.get("args") or ()), dict(document.get("kwargs") or {})
        return key_value(self.flow_key_fn, self.fn, args, kwargs)

    def __repr__(self) -> str:
        return f"<workflow {self.name}>"


@overload
def workflow(fn: Callable[P, Coroutine[Any, Any, R]], /) -> WorkflowDefinition[P, R]: ...
@overload
def workflow(
    fn: None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    owner: str | None = None,
    schedule: str | Schedule | Sequence[Schedule] | None = None,
    schedule_timezone: str | None = None,
    retention: Duration | None = None,
    concurrency: int | Concurrency | None = None,
    singleton: str | None = None,
    on_conflict: str | None = None,
) -> Callable[[Callable[P, Coroutine[Any, Any, R]]], WorkflowDefinition[P, R]]: ...


def workflow(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    owner: str | None = None,
    schedule: str | Schedule | Sequence[Schedule] | None = None,
    schedule_timezone: str | None = None,
    retention: Duration | None = None,
    concurrency: int | Concurrency | None = None,
    singleton: str | None = None,
    on_conflict: str | None = None,
) -> Any:
    """Make an ``async def`` function a durable workflow.

    Inputs and the result must be JSON. Workflow code must be deterministic:
    put I/O, randomness and wall-clock reads in tasks, or use
    :func:`keepgoing.now`, :func:`keepgoing.random` and :func:`keepgoing.uuid4`.

    ``schedule`` starts it on a schedule: a cron string (read in
    ``schedule_timezone``, default UTC), a :class:`~keepgoing.Schedule`, or a list
    of them. A worker serving it, or a deploy of its file, registers the schedule.

    ``retention`` (``"30d"``) is how long the store keeps a run of it after the
    run ended, in place of the store's ``[retention] runs`` (see the guide's
    Retention section).

    ``concurrency`` (an int or :class:`~keepgoing.Concurrency` with a ``key``) caps
    its open runs across every worker; a start over the limit waits as
    ``queued``, holding no worker. ``singleton="account_id"`` keeps one open run
    per value of that argument; ``on_conflict`` says what a start finding one
    does: ``"queue"`` (the default: it waits behind it), ``"skip"`` (the
    existing run's handle, with ``existing=True``) or ``"cancel_running"``
    (cancel it, then run). See the guide's Flow control section.

    Raises:
        TypeError: ``fn`` is not an ``async def`` function.
        InvalidScheduleError: a bad schedule (an invalid cron, an unknown zone, ...).
        InvalidDurationError: ``retention`` is not a duration.
        InvalidLimitError: a bad ``concurrency``, ``singleton`` or ``on_conflict``.
        DuplicateNameError: the name is already used by a workflow defined elsewhere.
    """

    def wrap(inner: Callable[..., Any]) -> WorkflowDefinition[..., Any]:
        return WorkflowDefinition(
            inner,
            name=name,
            description=description,
            owner=owner,
            schedule=schedule,
            schedule_timezone=schedule_timezone,
            retention=retention,
            concurrency=concurrency,
            singleton=singleton,
            on_conflict=on_conflict,
        )

    return wrap(fn) if fn is not None else wrap
