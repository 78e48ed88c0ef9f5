"""Live updates over server-sent events: the runs as they change, a run's new events.

Both streams wait on the store's wake-ups (``Store.wait_for_change``: a
``LISTEN`` on PostgreSQL, the doorbell on SQLite) and read what changed, with
a fallback read every ``RUNS_POLL``/``HISTORY_POLL`` seconds, since not every
write rings (a worker's fast path, which completes a step and starts the
next in one commit, wakes no one by design). A comment line is sent after
``HEARTBEAT`` seconds of silence so proxies keep the connection open.

Bounded: each stream is one generator that only this client's socket can
slow down (the server's other requests do not wait for it); at most
``ServerContext.max_streams`` are open per server process (a 503 past that),
and at most ``ServerContext.max_streams_per_token`` for any one token (a 429),
so one caller cannot take every slot;
a client that goes away ends its generator (Starlette cancels it), which
frees its slot; and a stream ends after ``ServerContext.stream_max`` seconds
(``keepgoing server --stream-max``, 10 minutes by default). A browser's
``EventSource`` then reconnects after the ``retry`` the stream set (1 s) and,
with the ``Last-Event-ID`` it saw, resumes where it was: a run's stream after
that event's seq, the runs stream from that instant.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import StreamingResponse

from keepgoing._history.codec import encode
from keepgoing._server.auth import ReadsRuns
from keepgoing._server.context import ServerContext, context
from keepgoing._server.errors import ApiError
from keepgoing._server.routes._common import (
    PREFIX,
    STRICT,
    RunIdQuery,
    WorkflowIdPath,
    documented,
    find_run,
)
from keepgoing._server.schemas import RunView
from keepgoing._sse import KEEPALIVE, frame, opening
from keepgoing._store.doorbell import WaitKey
from keepgoing._store.records import TERMINAL, RunRecord
from keepgoing._views.queues import serving

__all__ = ["HEARTBEAT", "router"]

router = APIRouter(prefix=PREFIX, tags=["streams"], dependencies=STRICT)

HEARTBEAT = 15.0
RUNS_POLL = 1.0
HISTORY_POLL = 0.5
#: How far back the runs stream re-reads, for writers whose clocks lag the server's.
LOOKBACK = 5.0
BATCH = 500
SEEN_MAX = 20_000

_SSE = {"description": "A `text/event-stream`.", "content": {"text/event-stream": {}}}


RETRY_MS = 1000


def _left(ends: float, poll: float) -> float:
    """How long to wait next: ``poll``, or less when the stream ends sooner."""
    return max(0.0, min(poll, ends - time.monotonic()))


def _response(
    ctx: ServerContext, body: AsyncIterator[bytes], request: Request
) -> StreamingResponse:
    principal = getattr(request.state, "principal", None)
    caller = (principal.token_id or principal.id) if principal is not None else ""
    if ctx.streams >= ctx.max_streams:
        raise ApiError(
            503,
            "too_many_streams",
            f"this server already serves {ctx.streams} event streams (its limit); "
            "close one or retry later",
        )
    mine = ctx.streams_by_token.get(caller, 0)
    if mine >= ctx.max_streams_per_token:
        raise ApiError(
            429,
            "too_many_streams",
            f"this token already holds {mine} event streams on this server (the most one "
            "token may); close one or retry later",
        )
    ctx.streams += 1
    ctx.streams_by_token[caller] = mine + 1

    async def guarded() -> AsyncIterator[bytes]:
        try:
            async for chunk in body:
                yield chunk
        finally:
            ctx.streams -= 1
            left = ctx.streams_by_token.get(caller, 1) - 1
            if left > 0:
                ctx.streams_by_token[caller] = left
            else:
                ctx.streams_by_token.pop(caller, None)

    return StreamingResponse(
        guarded(),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


@router.get(
    "/stream/runs",
    responses=documented(429, ok=_SSE),
    response_class=StreamingResponse,
    summary="Runs as they change (server-sent events)",
)
async def stream_runs(
    request: Request,
    _: ReadsRuns,
    last_event_id: Annotated[
        str,
        Header(
            pattern=r"^([0-9]{1,11}(\.[0-9]{1,9})?)?$",
            description="The `id` of the last event seen: resume from there.",
        ),
    ] = "",
) -> StreamingResponse:
    """An event `run` for each run created or changed after the stream opened, with
    `data` = `{"change": "created" | "status" | "updated", "run": <run view>}`:
    *created* for a new run, *status* when its status changed, *updated* for any
    other change (a step recorded). Changes that come together are sent once per
    run. Each event's `id` is the instant it was read from; a client that
    reconnects with it as `Last-Event-ID` gets every run changed since then (as
    *updated*, or *created* for runs created since). A comment (`: keepalive`) is
    sent after 15 s of silence; the stream ends after the server's `--stream-max`."""
    ctx = context(request)
    resume = None
    if last_event_id:
        resume = float(last_event_id)  # its pattern is checked: digits, maybe a fraction
    return _response(ctx, _runs(ctx, resume), request)


async def _runs(ctx: ServerContext, resume: float | None) -> AsyncIterator[bytes]:
    store, key = ctx.store, WaitKey()
    await store.wait_for_change(0, key)  # from here on no ring is missed
    ends = time.monotonic() + ctx.stream_max
    opened = ctx.clock.now() if resume is None else resume
    seen: dict[str, tuple[float, str]] = {}
    if resume is None:
        for run in await store.runs_changed(opened - LOOKBACK, limit=BATCH):
            seen[run.run_id] = (run.updated_at, run.status)
    since = opened - LOOKBACK
    quiet = time.monotonic()
    yield opening(RETRY_MS, "stream of runs")
    while time.monotonic() < ends:
        read_at = ctx.clock.now()
        changed = await store.runs_changed(since, limit=BATCH)
        frames = []
        served = None
        for run in changed:
            before = seen.get(run.run_id)
            if before is not None and before[0] == run.updated_at:
                continue
            if before is None:
                change = "created" if run.created_at >= opened - LOOKBACK else "status"
            else:
                change = "status" if before[1] != run.status else "updated"
            seen[run.run_id] = (run.updated_at, run.status)
            if served is None:
                served = await serving(store, ctx.clock.now(), changed)
            view = RunView.of(run, served).model_dump(mode="json")
            frames.append(
                frame({"change": change, "run": view}, event="run", event_id=read_at - LOOKBACK)
            )
        if len(changed) >= BATCH:
            since = changed[-1].updated_at  # a full batch: read on from its end
        elif changed:
            since = max(since, changed[-1].updated_at - LOOKBACK)
        if len(seen) > SEEN_MAX:
            for run_id, (at, _status) in list(seen.items()):
                if at < since - LOOKBACK:
                    del seen[run_id]
        if frames:
            yield b"".join(frames)
            quiet = time.monotonic()
        elif time.monotonic() - quiet >= HEARTBEAT:
            yield KEEPALIVE
            quiet = time.monotonic()
        if len(changed) < BATCH:
            await store.wait_for_change(_left(ends, RUNS_POLL), key)


@router.get(
    "/runs/{workflow_id:kgid}/stream",
    responses=documented(404, 429, ok=_SSE),
    response_class=StreamingResponse,
    summary="A run's new events as they are appended (server-sent events)",
)
async def stream_run(
    workflow_id: WorkflowIdPath,
    request: Request,
    _: ReadsRuns,
    run_id: RunIdQuery = None,
    after: Annotated[
        int | None,
        Query(ge=0, le=2**62, description="Send the events after this seq (default: all)."),
    ] = None,
    last_event_id: Annotated[
        str,
        Header(pattern=r"^([0-9]{1,18})?$", description="The seq of the last event seen."),
    ] = "",
) -> StreamingResponse:
    """The run's history events after `after` (or after the `Last-Event-ID` a
    reconnecting `EventSource` sends), each as an event `history` whose `id` is its
    seq and whose `data` is the event in the format of `GET .../history`; then, once
    the run has ended and every event was sent, one event `end` with the run view.
    A blocked run has not ended: the stream stays open."""
    ctx = context(request)
    run = await find_run(ctx.store, workflow_id, run_id)
    start = after
    if start is None and last_event_id:
        start = int(last_event_id)  # its pattern is checked: digits
    return _response(ctx, _history(ctx, run, start or 0), request)


async def _history(ctx: ServerContext, run: RunRecord, after: int) -> AsyncIterator[bytes]:
    store, key = ctx.store, WaitKey()
    await store.wait_for_change(0, key)
    ends = time.monotonic() + ctx.stream_max
    quiet = time.monotonic()
    yield opening(RETRY_MS, "stream of history")
    while time.monotonic() < ends:
        current = await store.get_run(run.run_id)
        events = await store.read_history(run.run_id, after)
        if events:
            after = events[-1].seq
            yield b"".join(frame(encode(e), event="history", event_id=e.seq) for e in events)
            quiet = time.monotonic()
        if current is None or current.status in TERMINAL:
            # Read after the status: an ended run's last events are in by now.
            rest = await store.read_history(run.run_id, after)
            if rest:
                yield b"".join(frame(encode(e), event="history", event_id=e.seq) for e in rest)
            ended = current or run
            yield frame(RunView.of(ended).model_dump(mode="json"), event="end")
            return
        if not events and time.monotonic() - quiet >= HEARTBEAT:
            yield KEEPALIVE
            quiet = time.monotonic()
        await store.wait_for_change(_left(ends, HISTORY_POLL), key)
