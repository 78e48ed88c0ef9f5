"""The web UI's pages: Jinja2 shells that the scripts in ``static/`` fill from the API.

Each page is rendered for the caller the door let in (``request.state.principal``):
its permissions decide which controls appear (the server refuses the others
anyway), and the page carries the session's CSRF token for the scripts to send.
Data comes from the ``/api/v1`` routes the scripts call with the session cookie,
so the UI sees exactly what the API allows the token to see.
"""

from __future__ import annotations

import urllib.parse
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates

from keepgoing._server.auth import ANONYMOUS, Principal, Unauthenticated, authenticate
from keepgoing._server.context import context
from keepgoing._server.ui.session import (
    CSRF_FIELD,
    clear_cookie,
    csrf_token,
    end_session,
    form_fields,
    same_origin,
    session_cookie,
    session_token,
    start_session,
)
from keepgoing._store.auth_protocol import PERMISSIONS
from keepgoing._version import __version__

__all__ = ["TEMPLATES", "router"]

HERE = Path(__file__).parent
TEMPLATES = Jinja2Templates(directory=str(HERE / "templates"))
router = APIRouter(include_in_schema=False)

#: What the navigation links to: (path, label, permission needed to see it).
NAV = (
    ("/", "Runs", "runs.read"),
    ("/replay", "Replay", "runs.read"),
    ("/diff", "Diff", "runs.read"),
    ("/memory", "Memory", "volumes.read"),
    ("/reviews", "Reviews", "runs.read"),
    ("/schedules", "Schedules", "schedules.read"),
    ("/workers", "Workers", "runs.read"),
    ("/usage", "Usage", "gateway.read"),
    ("/audit", "Audit", "admin"),
)
_MAX_ID = 512
_MAX_TOKEN = 400
_MAX_FORM = 4096
#: Who a page is rendered for before signing in: allowed nothing.
NOBODY = Principal("user", "", None, frozenset())


def _principal(request: Request) -> Principal:
    """Who the page is for: the door's principal, or nobody before signing in."""
    found: Principal | None = getattr(request.state, "principal", None)
    if found is not None:
        return found
    return NOBODY if context(request).auth else ANONYMOUS


def _page(request: Request, template: str, title: str, **values: Any) -> HTMLResponse:
    ctx = context(request)
    principal = _principal(request)
    token = session_token(request.headers)
    can = {p: principal.allows(p) for p in (*PERMISSIONS, "workers.kill")}
    response = TEMPLATES.TemplateResponse(
        request,
        template,
        {
            "title": title,
            "auth": ctx.auth,
            "principal": principal,
            "can": can,
            "nav": [(path, label) for path, label, need in _nav(request) if principal.allows(need)],
            "csrf": csrf_token(token) if token else "",
            "csrf_field": CSRF_FIELD,
            "version": __version__,
            "path": request.url.path,
            **values,
        },
    )
    response.headers["Cache-Control"] = "no-store"
    response.headers["X-Frame-Options"] = "DENY"
    response.headers["Content-Security-Policy"] = (
        "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
        "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
    )
    response.headers["Referrer-Policy"] = "same-origin"
    return response


def _nav(request: Request) -> tuple[tuple[str, str, str], ...]:
    """The navigation; ``keepgoing demo`` (whose app holds ``state.demo``) adds its page."""
    if getattr(request.app.state, "demo", None) is not None:
        return (("/demo", "Demo", "runs.read"), *NAV)
    return NAV


IdQuery = Annotated[str, Query(max_length=_MAX_ID)]


@router.get("/", response_class=HTMLResponse)
async def runs_page(request: Request) -> HTMLResponse:
    allowed = _principal(request).allows("runs.read")
    counts = await context(request).store.run_counts() if allowed else {}
    return _page(request, "runs.html", "Runs", counts=counts)


@router.get("/run", response_model=None)
async def run_page(
    request: Request, id: IdQuery = "", run: IdQuery = "", step: IdQuery = ""
) -> Response:
    """A run's page; ``?run=RUN_ID`` alone (a volume version, or a usage row, names
    only its run id) redirects to the page of that run's workflow id (with ``step``)."""
    if run and not id and _principal(request).allows("runs.read"):
        found = await context(request).store.get_run(run)
        if found is not None:
            wanted = {"id": found.workflow_id, "run": found.run_id}
            if step.isdigit():
                wanted["step"] = step
            query = urllib.parse.urlencode(wanted)
            return RedirectResponse(f"/run?{query}", status_code=303)
    return _page(request, "run.html", id or "Run", workflow_id=id, run_id=run)


#: The recorded runs shipped in ``static/recordings/`` (written by ``make record-demo``).
RECORDINGS = {"support-digest": "The support-digest agent: a worker killed mid-step"}


@router.get("/replay", response_class=HTMLResponse)
async def replay_page(
    request: Request, id: IdQuery = "", run: IdQuery = "", recording: IdQuery = ""
) -> HTMLResponse:
    """``?recording=support-digest`` opens a shipped recording (the demo's first step)."""
    shipped = recording if recording in RECORDINGS else ""
    return _page(
        request,
        "replay.html",
        "Replay",
        workflow_id=id,
        run_id=run,
        recording=shipped,
        recordings=RECORDINGS,
    )


@router.get("/demo", response_class=HTMLResponse)
async def demo_page(request: Request) -> HTMLResponse:
    """The demo's page: served by every server, live only under ``keepgoing demo``
    (its script reads ``/api/v1/demo``, a route only the demo adds)."""
    running = getattr(request.app.state, "demo", None) is not None
    return _page(request, "demo.html", "Kill the worker. The agent keeps going.", running=running)


@router.get("/diff", response_class=HTMLResponse)
async def diff_page(request: Request, a: IdQuery = "", b: IdQuery = "") -> HTMLResponse:
    return _page(request, "diff.html", "Diff two runs", a=a, b=b)


@router.get("/memory", response_class=HTMLResponse)
async def memory_page(request: Request) -> HTMLResponse:
    return _page(request, "memory.html", "Memory")


@router.get("/memory/volume", response_class=HTMLResponse)
async def volume_page(
    request: Request, name: IdQuery = "", ref: IdQuery = "main", version: IdQuery = ""
) -> HTMLResponse:
    return _page(request, "volume.html", name or "Volume", name=name, ref=ref, version=version)


@router.get("/reviews", response_class=HTMLResponse)
async def reviews_page(request: Request) -> HTMLResponse:
    """Runs waiting for a reviewer: each uncertain operation, its evidence, and the
    approve / retry / fail choice (for a token that may send messages)."""
    return _page(request, "reviews.html", "Reviews")


@router.get("/schedules", response_class=HTMLResponse)
async def schedules_page(request: Request) -> HTMLResponse:
    """Schedules: next fire times, recent actions linked to their runs, and pause,
    unpause and trigger buttons (for a session that may write schedules)."""
    return _page(request, "schedules.html", "Schedules")


@router.get("/workers", response_class=HTMLResponse)
async def workers_page(request: Request) -> HTMLResponse:
    return _page(request, "workers.html", "Workers")


@router.get("/usage", response_class=HTMLResponse)
async def usage_page(request: Request) -> HTMLResponse:
    """The model gateway's usage: tokens, cost, latency, a chart, the keys' budgets."""
    return _page(request, "usage.html", "Usage")


@router.get("/audit", response_class=HTMLResponse)
async def audit_page(request: Request) -> HTMLResponse:
    return _page(request, "audit.html", "Audit log")


@router.get("/signin", response_class=HTMLResponse)
async def signin_page(request: Request, next: IdQuery = "/") -> HTMLResponse:
    return _page(request, "signin.html", "Sign in", next=_local(next), error="")


@router.post("/signin", response_model=None)
async def signin(request: Request) -> Response:
    """Check the pasted token and start a session with it (an HTML form's body,
    parsed here: the form has two short fields)."""
    ctx = context(request)
    body = await request.body()
    fields = await form_fields(body[:_MAX_FORM])
    token = fields.get("token", "")[:_MAX_TOKEN]
    next = (fields.get("next") or "/")[:_MAX_ID]
    if not ctx.auth:
        return RedirectResponse(_local(next), status_code=303)
    if not same_origin(request.headers, request.url.scheme):
        return _signin_error(request, next, "sign in from this server's own page", 403)
    try:
        principal = await authenticate(ctx.store, token.strip())
    except Unauthenticated as exc:
        return _signin_error(request, next, str(exc), 401)
    request.state.principal = principal
    assert principal.token_id is not None
    value = await start_session(
        ctx.store, principal.token_id, ctx.clock.now(), ctx.session_lifetime
    )
    response = RedirectResponse(_local(next), status_code=303)
    response.headers["Set-Cookie"] = session_cookie(value, secure=request.url.scheme == "https")
    return response


@router.post("/signout", response_model=None)
async def signout(request: Request) -> Response:
    """End the session (the CSRF check in :mod:`keepgoing._server.ui.session` ran first):
    its record is ended, so its cookie is worth nothing even if it was copied."""
    ctx = context(request)
    await end_session(
        ctx.store, session_token(request.headers, request.url.scheme == "https"), ctx.clock.now()
    )
    response = RedirectResponse("/signin", status_code=303)
    response.headers["Set-Cookie"] = clear_cookie(secure=request.url.scheme == "https")
    return response


def _signin_error(request: Request, next: str, message: str, status: int) -> HTMLResponse:
    request.state.principal = None
    response = _page(request, "signin.html", "Sign in", next=_local(next), error=message)
    response.status_code = status
    return response


def _local(target: str) -> str:
    """``target`` if it is a path on this server, else ``/`` (no open redirect)."""
    parsed = urllib.parse.urlsplit(target)
    if parsed.scheme or parsed.netloc or not target.startswith("/") or target.startswith("//"):
        return "/"
    if "\\" in target:
        return "/"
    return target
