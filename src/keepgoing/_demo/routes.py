"""The demo's own API, served only by ``keepgoing demo`` (never by a plain server).

``GET /api/v1/demo`` says what the demo offers (the model, its live runs, the use
cases); ``POST /api/v1/demo/live`` starts a live run of the agent;
``POST /api/v1/demo/use-cases/{key}/start`` starts a use case on the demo's stack.
The demo runs with authentication off on loopback, so the server's door already
refuses other hosts and other browser origins.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, FastAPI, Request

from keepgoing._client.deploy import WorkflowWorker
from keepgoing._demo.digest import GROUP, Pace, model_label, start_run
from keepgoing._demo.usecases import USE_CASES, DemoStack, UseCase
from keepgoing._server.errors import ApiError

__all__ = ["DemoState", "install"]

RECORDING = "/replay?recording=support-digest"


@dataclass
class DemoState:
    """What the demo's routes act on."""

    stack: DemoStack
    worker: WorkflowWorker | None = None
    use_cases: tuple[UseCase, ...] = USE_CASES
    live_runs: list[str] = field(default_factory=list)
    started: dict[str, str] = field(default_factory=dict)  # use case key -> workflow id
    lock: threading.Lock = field(default_factory=threading.Lock)

    def start_live(self) -> str:
        if self.worker is None:
            raise ApiError(409, "demo_not_ready", "the agent's group is still being deployed")
        with self.lock:
            run_key = f"week-42-live-{len(self.live_runs) + 1}"
            workflow_id = start_run(self.stack, self.worker, run_key)
            self.live_runs.append(workflow_id)
        return workflow_id

    def start_use_case(self, key: str) -> str:
        found = next((u for u in self.use_cases if u.key == key), None)
        if found is None:
            raise ApiError(404, "use_case_not_found", f"the demo offers no use case {key!r}")
        try:
            workflow_id = found.start(self.stack)
        except ApiError:
            raise
        except Exception as exc:
            raise ApiError(500, "use_case_failed", f"{key} did not start: {exc}") from exc
        self.started[key] = workflow_id
        return workflow_id


def _run_link(workflow_id: str) -> str:
    return f"/run?id={quote(workflow_id, safe='')}"


def _state(request: Request) -> DemoState:
    state: DemoState = request.app.state.demo
    return state


router = APIRouter(prefix="/api/v1/demo", include_in_schema=False)


@router.get("")
async def describe(request: Request) -> dict[str, Any]:
    state = _state(request)
    pace = Pace.of(state.stack.fast)
    return {
        "model": model_label(),
        "scripted": model_label().startswith("scripted"),
        "group": GROUP,
        "ready": state.worker is not None,
        "fast": state.stack.fast,
        "live": {
            "tickets": pace.tickets,
            "batches": -(-pace.tickets // pace.batch_size),
            "pause_seconds": pace.pause_seconds,
        },
        "live_runs": [{"workflow_id": w, "url": _run_link(w)} for w in state.live_runs],
        "recording": RECORDING,
        "use_cases": [
            {
                "key": u.key,
                "title": u.title,
                "area": u.area,
                "summary": u.summary,
                "workflow_id": state.started.get(u.key),
            }
            for u in state.use_cases
        ],
    }


@router.post("/live")
async def live(request: Request) -> dict[str, str]:
    workflow_id = await asyncio.to_thread(_state(request).start_live)
    return {"workflow_id": workflow_id, "url": _run_link(workflow_id)}


@router.post("/use-cases/{key}/start")
async def start_use_case(key: str, request: Request) -> dict[str, str]:
    if len(key) > 64:
        raise ApiError(404, "use_case_not_found", "the demo offers no such use case")
    workflow_id = await asyncio.to_thread(_state(request).start_use_case, key)
    return {"workflow_id": workflow_id, "url": _run_link(workflow_id)}


def install(app: FastAPI, state: DemoState) -> None:
    """Serve the demo's routes on ``app`` (the page itself is one of the UI's)."""
    app.state.demo = state
    app.include_router(router)
