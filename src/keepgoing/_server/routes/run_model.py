"""A run's history folded as the web UI draws it (``keepgoing._views.run_model``).

``GET /runs/{id}/model`` folds a stored run's history (up to ``upto``, for replay);
``POST /histories/fold`` folds the events of a history file the browser opened
(the replay page) and stores nothing. Both need ``runs.read``; the POST goes
through the same door, session and CSRF checks as every other.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, ConfigDict

from keepgoing._history import events as ev
from keepgoing._history.codec import decode, encode, plain
from keepgoing._server.auth import ReadsRuns
from keepgoing._server.context import context
from keepgoing._server.routes._common import (
    PREFIX,
    STRICT,
    RunIdQuery,
    WorkflowIdPath,
    check_depth,
    documented,
    find_run,
)
from keepgoing._views.run_model import build_model
from keepgoing.errors import InvalidRequestError, PayloadError, PayloadTooLargeError

__all__ = ["MAX_FOLD_EVENTS", "router"]

router = APIRouter(prefix=PREFIX, tags=["runs"], dependencies=STRICT)

#: The most events ``POST /histories/fold`` takes (the request's body limit applies too).
MAX_FOLD_EVENTS = 20_000

_OPEN = ("queued", "running", "blocked")


class RunModel(BaseModel):
    """The run as the UI draws it: ``run``, ``steps`` (each with its attempts, the
    bar still open, memory writes, a review decision and ``reused`` when a replacement
    worker carried on from its saved output), ``waits``, ``losses``, ``messages``,
    ``sent``, ``children``, ``memory``, ``activations``, ``problems`` (worker losses
    first, then steps waiting for review, then other retries), ``eventCount`` and the
    span ``first``..``last``."""

    model_config = ConfigDict(extra="allow")

    run: dict[str, Any]
    steps: list[dict[str, Any]]
    problems: list[dict[str, Any]]


class FoldBody(BaseModel):
    """A history's events, in the format of ``GET .../history`` and ``keepgoing history
    export``."""

    model_config = ConfigDict(extra="forbid")

    # Not a schema bound: the body limit usually comes first, and the count is
    # refused with 413 like every other size (see ``fold_history``).
    events: list[dict[str, Any]]


@router.get(
    "/runs/{workflow_id:kgid}/model",
    response_model=RunModel,
    responses=documented(404),
    summary="A run's history, folded for the UI",
)
async def run_model(
    workflow_id: WorkflowIdPath,
    request: Request,
    _: ReadsRuns,
    run_id: RunIdQuery = None,
    upto: Annotated[
        int | None, Query(ge=0, le=2**62, description="Only the events up to this seq.")
    ] = None,
    events: Annotated[
        bool, Query(description="Also `events`: the history as `GET .../history` gives it.")
    ] = False,
) -> dict[str, Any]:
    """The run's history folded into steps, attempts, waits, losses, messages and
    problems: what the run page, replay and the diff draw. An open run's running step
    is drawn up to the server's now. With `events=true` the history comes along, so
    a page that shows both reads it once."""
    ctx = context(request)
    run = await find_run(ctx.store, workflow_id, run_id)
    history = await ctx.store.read_history(run.run_id)
    if upto is not None:
        history = [e for e in history if e.seq <= upto]
    now = ctx.clock.now() if run.status in _OPEN and upto is None else None
    encoded = [encode(e) for e in history]
    model = _fold(history, now, encoded)
    if events:
        model["events"] = encoded
    return model


@router.post(
    "/histories/fold",
    response_model=RunModel,
    responses=documented(reads=False),
    summary="Fold a history file for the UI",
)
async def fold_history(body: FoldBody, _: ReadsRuns) -> dict[str, Any]:
    """The events of a history file (the replay page's upload) folded as
    `GET /runs/{id}/model` folds a stored run's: nothing is stored. At most
    20,000 events, each as `keepgoing history export` writes it."""
    if len(body.events) > MAX_FOLD_EVENTS:
        raise PayloadTooLargeError(
            f"a history to fold holds at most {MAX_FOLD_EVENTS:,} events, not "
            f"{len(body.events):,}: open a shorter one"
        )
    check_depth(body.events, "events")
    return _fold([_event(i, body) for i, body in enumerate(body.events)], None)


def _event(i: int, body: dict[str, Any]) -> ev.Event:
    seq, at = body.get("seq"), body.get("at")
    if not isinstance(seq, int) or isinstance(seq, bool) or not isinstance(at, int | float):
        raise InvalidRequestError(f"event #{i} needs a whole-number seq and a numeric at")
    try:
        event = decode(body)
        # The store's rules for what an event may carry (finite numbers, JSON values).
        return plain(event, seq, float(at))
    except PayloadError as exc:
        raise InvalidRequestError(f"event #{i}: {exc}") from None
    except (TypeError, ValueError) as exc:
        raise InvalidRequestError(f"event #{i} is not a history event: {exc}") from None


def _fold(
    events: list[ev.Event], now: float | None, encoded: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    try:
        return build_model(events, now=now, encoded=encoded)
    except (TypeError, KeyError, ValueError, AttributeError, IndexError) as exc:
        raise InvalidRequestError(f"the history cannot be folded: {exc!r}") from None
