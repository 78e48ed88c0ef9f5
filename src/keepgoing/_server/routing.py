"""Routing on the raw path: workflow ids that contain ``/``, and any volume path.

A workflow id may contain ``/`` (a child's default id does). In
``/api/v1/runs/{workflow_id}/history`` the router would see ``t%2Fhistory``
decoded to ``t/history`` and answer the history of run ``t``. So
:class:`RunPaths` reads the path as the client sent it: an encoded ``%2F``
belongs to the id; a literal ``/`` followed by ``history``, ``result``,
``lineage``, ``cancel``, ``messages``, ``unblock``, ``migrate``, ``logs``, ``steps``,
``model``, ``stream``, ``kill-worker``, ``status``, ``resume``, ``fork`` or ``check`` as the last
segment names that call,
and any other literal ``/`` belongs to the id too (``/runs/a/b`` is run
``a/b``). It passes the id on percent-encoded as one segment, which the
``kgid`` convertor of the routes decodes again.

The ``volpath`` convertor matches any file path, newlines included, so a
control character reaches the volume rules and gets their 400
``volume_error`` rather than a 404 from the router.
"""

from __future__ import annotations

import urllib.parse

from starlette.convertors import Convertor, register_url_convertor
from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["ACTIONS", "RUNS", "RunPaths", "split_run_path"]

RUNS = "/api/v1/runs/"
ACTIONS = frozenset(
    {
        "history",
        "result",
        "lineage",
        "cancel",
        "messages",
        "unblock",
        "migrate",
        "logs",
        "steps",
        "model",
        "stream",
        "kill-worker",
        "status",
        "resume",
        "fork",
        "check",
    }
)


class _WorkflowId(Convertor[str]):
    regex = "[^/]+"

    def convert(self, value: str) -> str:
        return urllib.parse.unquote(value)

    def to_string(self, value: str) -> str:
        return urllib.parse.quote(value, safe="")


class _VolumePath(Convertor[str]):
    regex = r"[\s\S]*"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


register_url_convertor("kgid", _WorkflowId())
register_url_convertor("volpath", _VolumePath())


def split_run_path(raw: str) -> tuple[str, str | None]:
    """``(workflow id, call)`` of the raw (still percent-encoded) rest of a run path."""
    head, slash, last = raw.rpartition("/")
    if slash and head and urllib.parse.unquote(last) in ACTIONS:
        return urllib.parse.unquote(head), urllib.parse.unquote(last)
    return urllib.parse.unquote(raw), None


class RunPaths:
    """Rewrite ``/api/v1/runs/<id>[/<call>]`` so the router sees the id as one segment."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            raw_path = scope.get("raw_path")
            raw = raw_path.decode("latin-1") if raw_path else scope["path"]
            if raw.startswith(RUNS) and len(raw) > len(RUNS):
                workflow_id, call = split_run_path(raw[len(RUNS) :])
                path = RUNS + urllib.parse.quote(workflow_id, safe="")
                scope = {**scope, "path": path + f"/{call}" if call else path}
        await self.app(scope, receive, send)
