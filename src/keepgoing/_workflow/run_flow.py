"""``@workflow(concurrency=..., singleton=..., on_conflict=...)``, checked at decoration.

Builds the workflow's :class:`~keepgoing._run_flow.RunFlow`, the spec a worker
records and the store enforces on every start (``_store/sql/admission.py``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from keepgoing._limits import Concurrency, check_concurrency
from keepgoing._run_flow import ON_CONFLICT, OnConflict, RunFlow
from keepgoing.errors import InvalidLimitError

__all__ = ["run_flow"]

Key = str | Callable[..., object] | None


def run_flow(
    fn: Callable[..., Any],
    name: str,
    concurrency: int | Concurrency | None,
    singleton: str | None,
    on_conflict: str | None,
) -> tuple[RunFlow | None, Key]:
    """The run-flow spec of workflow ``name`` and its key (a name or a callable).

    Raises:
        InvalidLimitError: naming the workflow and the problem.
    """
    where = f"workflow {name!r}"
    if singleton is None:
        if on_conflict is not None:
            raise InvalidLimitError(f'on_conflict of {where} needs singleton="<argument>"')
        return _concurrency(fn, where, concurrency)
    if concurrency is not None:
        raise InvalidLimitError(
            f"{where} takes singleton= or concurrency=, not both (a singleton is a "
            "concurrency limit of one per key)"
        )
    if not isinstance(singleton, str) and not callable(singleton):
        raise InvalidLimitError(f"singleton of {where} must name an argument, not {singleton!r}")
    mode = "queue" if on_conflict is None else on_conflict
    if mode not in ON_CONFLICT:
        raise InvalidLimitError(
            f"on_conflict of {where} must be one of {', '.join(map(repr, ON_CONFLICT))}, "
            f"not {on_conflict!r}"
        )
    try:
        checked = check_concurrency(Concurrency(1, key=singleton), fn, where=where)
    except InvalidLimitError as exc:
        raise InvalidLimitError(str(exc).replace("concurrency of", "singleton of", 1)) from None
    assert isinstance(checked, Concurrency)
    flow = _spec(fn, checked, singleton=True, on_conflict=_mode(mode))
    return flow, checked.key


def _concurrency(
    fn: Callable[..., Any], where: str, value: int | Concurrency | None
) -> tuple[RunFlow | None, Key]:
    if isinstance(value, str):
        raise InvalidLimitError(
            f"concurrency of {where} must be an int or a Concurrency(...); named limits "
            "are for tasks"
        )
    checked = check_concurrency(value, fn, where=where)
    if checked is None:
        return None, None
    assert isinstance(checked, Concurrency)
    return _spec(fn, checked, singleton=False, on_conflict="queue"), checked.key


def _spec(
    fn: Callable[..., Any], limit: Concurrency, *, singleton: bool, on_conflict: OnConflict
) -> RunFlow:
    key = limit.key
    return RunFlow(
        limit=limit.limit,
        key=key if isinstance(key, str) else None,
        callable_key=callable(key),
        singleton=singleton,
        on_conflict=on_conflict,
        params=tuple(inspect.signature(fn).parameters),
    )


def _mode(value: str) -> OnConflict:
    for mode in ON_CONFLICT:
        if mode == value:
            return mode
    raise AssertionError(value)
