"""Errors as HTTP responses: ``{"code": ..., "message": ..., "details": {...}}``.

Every :class:`~keepgoing.errors.KeepgoingError` carries a stable ``code``;
:data:`STATUS` maps each code to its HTTP status. A client error is always a
4xx: malformed JSON and schema violations are 400 ``invalid_request``, never
FastAPI's 422. Only a bug is a 500, and its message says nothing internal.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from keepgoing import errors

__all__ = ["STATUS", "TOO_LARGE", "ApiError", "error_response", "install_error_handlers"]

#: Set in the request scope's state when the body crossed the size limit while streaming.
TOO_LARGE = "keepgoing.body_too_large"

log = logging.getLogger("keepgoing.server")

STATUS: dict[str, int] = {
    errors.ConfigurationError.code: 400,
    errors.InvalidDurationError.code: 400,
    errors.InvalidScheduleError.code: 400,
    errors.ScheduleNotFoundError.code: 404,
    errors.ScheduleExistsError.code: 409,
    errors.InvalidStoreURLError.code: 400,
    errors.DuplicateNameError.code: 400,
    errors.PayloadError.code: 400,
    errors.InvalidRequestError.code: 400,
    errors.ReuseRefusedError.code: 400,
    errors.VolumeError.code: 400,
    errors.GroupError.code: 400,
    errors.AuthenticationError.code: 401,
    errors.PermissionDeniedError.code: 403,
    errors.WorkflowNotFoundError.code: 404,
    errors.QueueNotFoundError.code: 404,
    errors.RunNotFoundError.code: 404,
    errors.TokenNotFoundError.code: 404,
    errors.VolumeNotFoundError.code: 404,
    errors.VolumeFileNotFoundError.code: 404,
    errors.GroupNotFoundError.code: 404,
    errors.OperationNotFoundError.code: 404,
    errors.OperationNotUncertainError.code: 409,
    "invalid_operation_id": 400,
    "not_found": 404,
    "worker_not_found": 404,
    "method_not_allowed": 405,
    errors.WorkflowAlreadyRunningError.code: 409,
    errors.WorkflowNotRunningError.code: 409,
    errors.GroupConflictError.code: 409,
    errors.DeployRefusedError.code: 409,
    errors.PayloadTooLargeError.code: 413,
    errors.BudgetExceededError.code: 429,
    errors.GatewayError.code: 502,
    errors.CassetteMissError.code: 502,
    errors.StoreError.code: 503,
    errors.SchemaVersionError.code: 503,
}


class ApiError(Exception):
    """An error the API answers with ``status`` and a stable ``code``."""

    def __init__(
        self, status: int, code: str, message: str, details: dict[str, Any] | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.details = details or {}


def error_response(
    status: int,
    code: str,
    message: str,
    details: dict[str, Any] | None = None,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    body = {"code": code, "message": message, "details": details or {}}
    return JSONResponse(body, status_code=status, headers=dict(headers) if headers else None)


def from_keepgoing(exc: errors.KeepgoingError) -> ApiError:
    """The API's answer to an error the engine or store raised."""
    code = exc.code
    if isinstance(exc, errors.PayloadTooLargeError):
        code = errors.PayloadTooLargeError.code
    status = STATUS.get(code)
    if status is None:
        log.error("unmapped keepgoing error %s: %s", code, exc)
        return ApiError(500, "internal", "the server failed; see its log")
    details: dict[str, Any] = {}
    if isinstance(exc, errors.WorkflowAlreadyRunningError):
        details = {"workflow_id": exc.workflow_id, "run_id": exc.run_id}
    if isinstance(exc, errors.ReuseRefusedError):
        details = {"workflow_id": exc.workflow_id, "run_id": exc.run_id}
    report = getattr(exc, "report", None)
    if isinstance(exc, errors.DeployRefusedError) and report is not None:
        details = {"report": report.to_body()}
    return ApiError(status, code, str(exc), details)


def install_error_handlers(app: FastAPI) -> None:
    """Answer every error in the envelope, with the status its code maps to."""

    async def api_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, ApiError)
        headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
        return error_response(exc.status, exc.code, exc.message, exc.details, headers)

    async def keepgoing_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, errors.KeepgoingError)
        return await api_error(request, from_keepgoing(exc))

    async def invalid(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        return error_response(400, "invalid_request", _describe(exc), {"errors": _problems(exc)})

    async def http_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        too_large = request.scope.get("state", {}).get(TOO_LARGE)
        if too_large:
            return error_response(413, "payload_too_large", too_large)
        code = {400: "invalid_request", 404: "not_found", 405: "method_not_allowed"}.get(
            exc.status_code, "http_error"
        )
        headers = exc.headers
        if exc.status_code == 405:
            methods = allowed_methods(request)
            headers = {**(headers or {}), "Allow": ", ".join(methods)}
            allowed = ", ".join(methods)
            message = f"{request.method} is not allowed here; use {allowed}"
            return error_response(405, code, message, {}, headers)
        return error_response(exc.status_code, code, str(exc.detail), headers=headers)

    async def not_unicode(_: Request, exc: Exception) -> JSONResponse:
        # A safety net: the routes refuse lone surrogates by field before this can happen.
        log.warning("text that is not Unicode reached the store: %s", exc)
        return error_response(
            400, errors.PayloadError.code, "the request holds text that is not valid Unicode"
        )

    async def crashed(_: Request, exc: Exception) -> JSONResponse:
        log.error("request failed", exc_info=exc)
        return error_response(500, "internal", "the server failed; see its log")

    app.add_exception_handler(ApiError, api_error)
    app.add_exception_handler(errors.KeepgoingError, keepgoing_error)
    app.add_exception_handler(RequestValidationError, invalid)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(UnicodeEncodeError, not_unicode)
    app.add_exception_handler(Exception, crashed)


def allowed_methods(request: Request) -> list[str]:
    """Every method some route serves at this path (the router only names the first
    route's), for the ``Allow`` header of a 405. ``app.state.allow`` lists each
    route's ``(path_regex, methods)``."""
    path = request.scope.get("path", "")
    found: set[str] = set()
    for regex, methods in getattr(request.app.state, "allow", ()):
        if regex.match(path):
            found |= set(methods)
    return sorted(found)


def _problems(exc: RequestValidationError) -> list[dict[str, Any]]:
    return [
        {"loc": [str(part) for part in e.get("loc", ())], "msg": str(e.get("msg", ""))}
        for e in exc.errors()
    ]


def _describe(exc: RequestValidationError) -> str:
    problems = _problems(exc)
    if not problems:
        return "the request is not valid"
    first = problems[0]
    if first["msg"].startswith("JSON decode error") or "json_invalid" in str(exc.errors()[0]):
        return f"the request body is not valid JSON: {first['msg']}"
    where = ".".join(first["loc"])
    more = f" (and {len(problems) - 1} more problem(s))" if len(problems) > 1 else ""
    return f"{where}: {first['msg']}{more}"
