"""What every route needs: the store, the auth switch, limits and the process's counters."""

from __future__ import annotations

from dataclasses import dataclass, field

from fastapi import Request

from keepgoing._clock import Clock, system_clock
from keepgoing._server.defaults import DEFAULT_MAX_BODY
from keepgoing._services.orchestrator import Orchestrator
from keepgoing._store.protocol import Store

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
    long_poll_max: float = 30.0
    counters: Counters = field(default_factory=Counters)
    orchestrator: Orchestrator | None = None


def context(request: Request) -> ServerContext:
    ctx: ServerContext = request.app.state.keepgoing
    return ctx
