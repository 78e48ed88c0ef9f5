"""A workflow's run-flow spec: its concurrency limit or singleton key, by argument name.

``@workflow(concurrency=2)``, ``@workflow(concurrency=Concurrency(2, key="account_id"))``
and ``@workflow(singleton="account_id", on_conflict=...)`` each become one
:class:`RunFlow`: at most ``limit`` open runs hold a slot at once, per value of
``key`` (a singleton is a limit of one, with a rule for a start that finds
its key's slot taken). The spec is plain data, on the ground floor, because
three layers read it: the workflow definition builds it, a worker records it
when it starts, and the store computes each start's key from the start's
input document with :meth:`RunFlow.key_of`, without the workflow's code.

Priorities live here too: claims order by ``runnable_since - priority * AGING``,
so one priority point is worth :data:`AGING` seconds of waiting.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "AGING",
    "ON_CONFLICT",
    "OnConflict",
    "RunFlow",
    "UncomputableKeyError",
    "canonical",
    "check_priority",
]

#: Seconds of waiting one priority point is worth in every claim's order.
AGING = 60

OnConflict = Literal["skip", "cancel_running", "queue"]
ON_CONFLICT: tuple[OnConflict, ...] = ("skip", "cancel_running", "queue")

#: A priority's bounds: far past any real use, inside every store's integers.
_PRIORITY_MAX = 1_000_000


class UncomputableKeyError(ValueError):
    """A start's key needs the workflow's code (a callable key) and was not given."""


@dataclass(frozen=True)
class RunFlow:
    """How many open runs of a workflow may hold a slot at once, per key.

    ``key`` is the argument whose value keys the slots (None: one set of slots
    for the workflow); ``callable_key``: the key is a function of the arguments,
    which only a process with the code can compute. ``params`` are the
    workflow's parameter names in order, to find a positional argument.
    ``singleton``: the limit is 1 and ``on_conflict`` says what a start finding
    its key's run open does.
    """

    limit: int
    key: str | None = None
    callable_key: bool = False
    singleton: bool = False
    on_conflict: OnConflict = "queue"
    params: tuple[str, ...] = ()

    def to_json(self) -> str:
        return canonical(
            {
                "limit": self.limit,
                "key": self.key,
                "callable_key": self.callable_key,
                "singleton": self.singleton,
                "on_conflict": self.on_conflict,
                "params": list(self.params),
            }
        )

    @classmethod
    def from_json(cls, text: str) -> RunFlow:
        data = json.loads(text)
        on_conflict = data.get("on_conflict", "queue")
        return cls(
            limit=int(data["limit"]),
            key=data.get("key"),
            callable_key=bool(data.get("callable_key", False)),
            singleton=bool(data.get("singleton", False)),
            on_conflict=on_conflict if on_conflict in ON_CONFLICT else "queue",
            params=tuple(data.get("params", ())),
        )

    def key_of(self, document: Mapping[str, Any], given: str | None = None) -> str:
        """The slot key of a start whose stored input is ``document``: the canonical
        JSON of the key argument's value ("" when the limit has no key).

        A callable key takes ``given``, the key the starting client computed from
        the definition.

        Raises:
            UncomputableKeyError: a callable key, and no key given.
        """
        if self.callable_key:
            if given is None:
                raise UncomputableKeyError(
                    "its limit is keyed by a function of the arguments, which only a "
                    "process with the workflow's code can compute; start it from a "
                    "process that imports the workflow (trigger_workflow with the "
                    "@workflow itself)"
                )
            return given
        if self.key is None:
            return ""
        kwargs = document.get("kwargs") or {}
        if self.key in kwargs:
            return canonical(kwargs[self.key])
        args: Sequence[Any] = document.get("args") or []
        if self.key in self.params:
            at = self.params.index(self.key)
            if at < len(args):
                return canonical(args[at])
        return canonical(None)


def canonical(value: object) -> str:
    """``value`` as canonical JSON text (sorted keys, compact): a key's one spelling."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False)


def check_priority(value: object, what: str = "priority") -> int:
    """``value`` as a priority, or ValueError naming ``what`` and the problem."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{what} must be an int (higher first), not {value!r}")
    if abs(value) > _PRIORITY_MAX:
        raise ValueError(f"{what} must be between -{_PRIORITY_MAX} and {_PRIORITY_MAX}")
    return value
