"""What every route needs: the store, the auth switch, limits and the process's counters."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from fastapi import Request

from keepgoing._clock import Clock, system_clock
from keepgoing._server.defaults import (
    DEFAULT_LONG_POLL_MAX,
    DEFAULT_MAX_BODY,
    DEFAULT_SESSION_IDLE,
    DEFAULT_SESSION_LIFETIME,
    DEFAULT_STREAM_MAX,
)
from keepgoing._store.protocol import Store
from keepgoing._worker.orchestrator import Orchestrator

__all__ = ["Counters", "ServerContext", "context"]


@dataclass
class Counters:
    """This process's own counters (Prometheus counters restart with the process)."""

    requests: dict[int, int] = field(default_factory=dict)

    def count_request(self, status: int) -> None:
        self.requests[status] = self.requests.get(status, 0) + 1


@dataclass
class ServerContext:
    store: Store
    auth: bool = True
    clock: Clock = system_clock
    max_body: int = DEFAULT_MAX_BODY
    long_poll_max: float = DEFAULT_LONG_POLL_MAX
    stream_max: float = DEFAULT_STREAM_MAX
    counters: Counters = field(default_factory=Counters)
    orchestrator: Orchestrator | None = None
    #: Held while a token is revoked, so two revokes cannot each leave the other last.
    revoking: asyncio.Lock = field(default_factory=asyncio.Lock)
    #: Queues a group, worker or deploy has served: known for good once seen.
    known_queues: set[str] = field(default_factory=set)
    #: Server-sent event streams open now, and how many may be (a 503 above), in all
    #: and for any one token (a 429 above: one caller cannot hold them all).
    streams: int = 0
    max_streams: int = 200
    streams_by_token: dict[str, int] = field(default_factory=dict)
    max_streams_per_token: int = 20
    #: A UI session ends after this many seconds unused, and this many after sign-in.
    session_idle: float = DEFAULT_SESSION_IDLE
    session_lifetime: float = DEFAULT_SESSION_LIFETIME


def context(request: Request) -> ServerContext:
    ctx: ServerContext = request.app.state.keepgoing
    return ctx
