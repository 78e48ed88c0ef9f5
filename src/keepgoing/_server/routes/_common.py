"""Shared bits of the routes: the documented error responses and run lookup."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Path, Query, Request

from keepgoing._payload import MAX_DEPTH
from keepgoing._server import routing  # noqa: F401 (registers the kgid and volpath convertors)
from keepgoing._server.errors import ApiError
from keepgoing._server.schemas import ID_PATTERN, ErrorBody
from keepgoing._store.protocol import Store
from keepgoing._store.records import RunRecord
from keepgoing.errors import PayloadError, RunNotFoundError

__all__ = [
    "MAX_DEPTH",
    "find_lone_surrogate",
    "PREFIX",
    "STRICT",
    "RunIdQuery",
    "WorkflowIdPath",
    "check_depth",
    "documented",
    "find_run",
]


PREFIX = "/api/v1"

_DESCRIPTIONS = {
    400: "Bad JSON, a field outside the schema (`invalid_request`, `invalid_payload`), or "
    "text that is not an operation id (`invalid_operation_id`).",
    401: "No token, or an unknown or revoked one (`unauthenticated`).",
    403: "The token lacks the permission this call needs (`permission_denied`).",
    404: "No such workflow, run, token, volume, ref, version or file.",
    409: "A conflict: the workflow id is running, the run has ended, or the token is the "
    "last admin token.",
    413: "The body or payload is over its size limit (`payload_too_large`).",
    429: "This token already holds as many event streams as one token may (`too_many_streams`).",
    503: "The store is unavailable (`store_error`), or the server holds as many event "
    "streams as it may (`too_many_streams`).",
}

WorkflowIdPath = Annotated[
    str,
    Path(
        pattern=ID_PATTERN,
        description="The workflow id of the run (its newest run). A `/` in it may be sent "
        "as it is or as `%2F`; a `/` before a final `history`, `result`, `lineage`, "
        "`cancel`, `messages`, `unblock`, `logs`, `steps`, `model`, `stream`, `kill-worker`, "
        "`status`, `resume`, `fork` or `check` must be sent as `%2F`.",
    ),
]
RunIdQuery = Annotated[
    str | None, Query(pattern=ID_PATTERN, description="A specific run of the workflow id.")
]


def documented(
    *statuses: int, reads: bool = True, ok: dict[str, Any] | None = None
) -> dict[int | str, dict[str, Any]]:
    """``responses=`` for a route: its error statuses (plus 400, 401, 403, 503, and
    413 for a route that takes a body), and ``ok`` as the 200 response if given."""
    every = {400, 401, 403, 503, *statuses}
    if not reads:
        every.add(413)
    found: dict[int | str, dict[str, Any]] = {200: ok} if ok is not None else {}
    for s in sorted(every):
        found[s] = {"model": ErrorBody, "description": _DESCRIPTIONS[s]}
    return found


async def find_run(store: Store, workflow_id: str, run_id: str | None) -> RunRecord:
    """The newest run of ``workflow_id``, or its run ``run_id``.

    Raises:
        RunNotFoundError: no such run.
    """
    if run_id is not None:
        run = await store.get_run(run_id)
        if run is not None and run.workflow_id == workflow_id:
            return run
        raise RunNotFoundError(f"no run {run_id!r} of workflow id {workflow_id!r}")
    found = await store.find_run(workflow_id)
    if found is None:
        raise RunNotFoundError(f"no run has workflow id {workflow_id!r}")
    return found


def check_depth(value: Any, what: str) -> None:
    """Refuse JSON nested more than :data:`MAX_DEPTH` deep (checked without recursion).

    Raises:
        PayloadError: too deep (400 ``invalid_payload``).
    """
    level: list[Any] = [value]  # after n rounds: the containers n + 1 levels down
    for _ in range(MAX_DEPTH):
        level = [
            child
            for item in level
            if isinstance(item, dict | list)
            for child in (item.values() if isinstance(item, dict) else item)
            if isinstance(child, dict | list)
        ]
        if not level:
            return
    raise PayloadError(f"{what} nests lists and objects more than {MAX_DEPTH} levels deep")


_ALLOWED: dict[int, frozenset[str]] = {}


async def refuse_unknown_query(request: Request) -> None:
    """A query parameter the route does not take is a 400, not silently ignored
    (``?stauts=failed`` would otherwise list every run)."""
    route = request.scope.get("route")
    dependant = getattr(route, "dependant", None)
    if dependant is None:
        return
    allowed = _ALLOWED.get(id(route))
    if allowed is None:
        allowed = _ALLOWED[id(route)] = frozenset(_query_names(dependant))
    unknown = sorted(set(request.query_params) - allowed)
    if unknown:
        takes = ", ".join(sorted(allowed)) or "none"
        raise ApiError(
            400,
            "invalid_request",
            f"unknown query parameter(s) {', '.join(unknown)}; this call takes: {takes}",
            {"errors": [{"loc": ["query", name], "msg": "unknown parameter"} for name in unknown]},
        )


def _query_names(dependant: Any) -> set[str]:
    names = {str(p.alias) for p in dependant.query_params}
    for sub in dependant.dependencies:
        names |= _query_names(sub)
    return names


async def refuse_lone_surrogates(request: Request) -> None:
    """Refuse a JSON body holding text that is not Unicode (a lone surrogate such as
    ``"\\ud800"``, which JSON's escapes can spell) with 400 ``invalid_payload`` naming
    the field: no store can encode it, and it must never get that far."""
    if request.method not in ("POST", "PUT", "PATCH") or not await request.body():
        return
    try:
        body = await request.json()  # parsed once already, for the route: cached
    except ValueError:
        return  # the route's own parsing reports it
    where = find_lone_surrogate(body)
    if where is not None:
        raise PayloadError(
            f"{where} holds a lone surrogate, which is not Unicode text; "
            "send text as valid UTF-8 (or as proper \\u escape pairs)"
        )


def find_lone_surrogate(value: Any, root: str = "body") -> str | None:
    """Where in JSON ``value`` a string or key holds a lone surrogate, or None.

    Walks without recursion, so nesting depth costs nothing here.
    """
    todo: list[tuple[Any, str]] = [(value, root)]
    while todo:
        item, where = todo.pop()
        if isinstance(item, str):
            if _lone_surrogate(item):
                return where
        elif isinstance(item, dict):
            for key, child in item.items():
                if isinstance(key, str) and _lone_surrogate(key):
                    return f"a key of {where}"
                todo.append((child, f"{where}.{key}" if _plain(key) else f"{where}[{key!r}]"))
        elif isinstance(item, list):
            todo.extend((child, f"{where}[{i}]") for i, child in enumerate(item))
    return None


def _lone_surrogate(text: str) -> bool:
    if text.isascii():
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _plain(key: object) -> bool:
    return isinstance(key, str) and key.isidentifier() and key.isascii()


#: Router dependencies every route shares.
STRICT = [Depends(refuse_unknown_query), Depends(refuse_lone_surrogates)]
