"""The web UI, served by ``keepgoing server`` (and ``keepgoing dev``) at ``/``.

Jinja2 page shells (:mod:`keepgoing._server.ui.pages`, ``templates/``), small authored
JavaScript modules and one stylesheet (``static/``, no build step, nothing from a
CDN), and the browser session (:mod:`keepgoing._server.ui.session`). The UI sits with
the server: it reads runs, histories and volumes through the server's own API
routes, with the permissions of the signed-in token.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from starlette.staticfiles import StaticFiles

from keepgoing._server.ui.pages import router
from keepgoing._server.ui.session import Session

__all__ = ["STATIC", "Session", "mount_ui"]

STATIC = Path(__file__).parent / "static"


def mount_ui(app: FastAPI) -> None:
    """Add the UI's pages and files to ``app`` (the session middleware is added by
    the app itself, outside the door)."""
    app.include_router(router)
    app.mount("/ui/static", StaticFiles(directory=str(STATIC)), name="ui-static")
