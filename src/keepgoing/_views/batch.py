"""What a batch of starts (``Client.trigger_many``) may hold: its lists checked for shape
and length, repeated ids refused, and each item's error named by its place."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterable, Iterator
from typing import Any

from keepgoing.errors import InvalidRequestError

__all__ = [
    "MAX_BATCH",
    "batch_lists",
    "check_id",
    "check_request_id",
    "naming",
    "refuse_repeats",
]

#: The most runs one ``trigger_many`` starts (one transaction holds the write lock).
MAX_BATCH = 1000

_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@/+=-]{0,199}$")
_REQUEST_ID = re.compile(r"^[0-9a-f]{32}$")


def batch_lists(
    given_inputs: object, workflow_ids: object, given_request_ids: object
) -> tuple[list[Any], list[str] | None, list[str] | None]:
    """The batch's inputs and its optional per-run ids, checked for shape and length."""
    inputs = _as_list(given_inputs, "inputs")
    ids = None if workflow_ids is None else _as_list(workflow_ids, "workflow_ids")
    request_ids = None if given_request_ids is None else _as_list(given_request_ids, "request_ids")
    if len(inputs) > MAX_BATCH:
        raise ValueError(
            f"trigger_many starts at most {MAX_BATCH} runs at once, not {len(inputs)}: "
            "split the batch"
        )
    for what, items in (("workflow_ids", ids), ("request_ids", request_ids)):
        if items is not None and len(items) != len(inputs):
            raise ValueError(
                f"trigger_many got {len(inputs)} inputs but {len(items)} {what}: give one per run"
            )
    return inputs, ids, request_ids


def _as_list(given: object, what: str) -> list[Any]:
    if isinstance(given, str | bytes | dict) or not isinstance(given, Iterable):
        raise TypeError(
            f"trigger_many's {what} must be a list (one item per run), not {type(given).__name__}"
        )
    return list(given)


@contextlib.contextmanager
def naming(i: int) -> Iterator[None]:
    """Name the batch item in an error about it (``start #i: ...``)."""
    try:
        yield
    except (TypeError, ValueError) as exc:
        try:
            renamed = type(exc)(f"start #{i}: {exc}")
        except Exception:
            exc.add_note(f"start #{i} of trigger_many")
            raise exc from None
        raise renamed from None


def refuse_repeats(values: list[str], what: str) -> None:
    first: dict[str, int] = {}
    for i, value in enumerate(values):
        if value in first:
            raise InvalidRequestError(
                f"start #{first[value]} and start #{i} have the same {what} {value!r}: one run each"
            )
        first[value] = i


def check_id(value: str, what: str) -> str:
    """``value`` if it is a valid workflow id, queue name or the like, else ValueError."""
    if not isinstance(value, str) or not _ID.match(value):
        raise ValueError(
            f"{what} {value!r} is not valid: use 1-200 letters, digits and ._:@/+=- "
            "starting with a letter or digit"
        )
    return value


def check_request_id(value: str) -> str:
    """``value`` if it is a valid request id (32 lowercase hex digits), else ValueError."""
    if not isinstance(value, str) or not _REQUEST_ID.match(value):
        raise ValueError(f"request_id {value!r} is not valid: use 32 lowercase hex digits")
    return value
