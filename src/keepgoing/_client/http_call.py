"""The HTTP backend's one call to the server: retries, and the server's errors mapped back.

A network failure or a 5xx answer is retried with exponential backoff and
jitter, but only for a call the backend marks idempotent. A 2xx answer is
decoded (JSON or text); an error answer becomes the ``keepgoing.errors`` class
of its ``code``, anything else a :class:`~keepgoing.errors.ServerError`.
:class:`HttpCalls` is a mixin of
:class:`~keepgoing._client.http_backend.HttpBackend`, which owns the ``httpx``
client and the retry settings.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import httpx

from keepgoing import errors
from keepgoing._backoff import backoff
from keepgoing._views import operations

__all__ = ["API", "HttpCalls"]

API = "/api/v1"
_MAX_BACKOFF = 5.0

_CODES: dict[str, type[errors.KeepgoingError]] = {
    cls.code: cls
    for cls in (
        errors.ConfigurationError,
        errors.InvalidDurationError,
        errors.DuplicateNameError,
        errors.PayloadError,
        errors.PayloadTooLargeError,
        errors.InvalidRequestError,
        errors.QueueNotFoundError,
        operations.InvalidOperationIdError,
        errors.OperationNotFoundError,
        errors.OperationNotUncertainError,
        errors.AuthenticationError,
        errors.PermissionDeniedError,
        errors.TokenNotFoundError,
        errors.WorkflowNotFoundError,
        errors.RunNotFoundError,
        errors.WorkflowNotRunningError,
        errors.VolumeError,
        errors.VolumeNotFoundError,
        errors.VolumeFileNotFoundError,
        errors.GroupError,
        errors.GroupNotFoundError,
        errors.GroupConflictError,
        errors.InvalidScheduleError,
        errors.ScheduleNotFoundError,
        errors.ScheduleExistsError,
        errors.StoreError,
    )
}


class HttpCalls:
    """The transport half of the HTTP backend (its ``call`` and the pause between retries)."""

    url: str
    retries: int
    backoff: float
    _http: httpx.Client

    def call(
        self,
        method: str,
        path: str,
        *,
        idempotent: bool,
        json: Any = None,
        params: Mapping[str, Any] | None = None,
        timeout: float | None = None,
    ) -> Any:
        """One API call; returns the decoded JSON (or text) of a 2xx answer.

        Raises:
            ServerError: the server is unreachable or failed (after retries if idempotent).
            KeepgoingError: the subclass of the server's error code.
        """
        attempts = 1 + (self.retries if idempotent else 0)
        query = {k: v for k, v in (params or {}).items() if v is not None}
        extra: dict[str, Any] = {} if timeout is None else {"timeout": timeout}
        for attempt in range(attempts):
            last = attempt + 1 == attempts
            try:
                response = self._http.request(method, path, json=json, params=query, **extra)
            except httpx.TransportError as exc:
                if last:
                    raise errors.ServerError(
                        f"could not reach the keepgoing server at {self.url} "
                        f"({type(exc).__name__}: {exc})"
                        + (f" after {attempts} attempts" if attempts > 1 else "")
                    ) from exc
                self._pause(attempt)
                continue
            if response.status_code >= 500 and not last:
                self._pause(attempt)
                continue
            return _decode(response)
        raise AssertionError("unreachable")

    def _pause(self, attempt: int) -> None:
        # From 20% under the delay to 20% over it: 1.2 * [2/3 d, d].
        time.sleep(1.2 * backoff(attempt, base=self.backoff, cap=_MAX_BACKOFF, jitter=1 / 3))


def _decode(response: httpx.Response) -> Any:
    if response.is_success:
        kind = response.headers.get("content-type", "")
        return response.json() if kind.startswith("application/json") else response.text
    try:
        body = response.json()
        code, message = str(body["code"]), str(body["message"])
        details = body.get("details") or {}
    except (ValueError, KeyError, TypeError):
        raise errors.ServerError(
            f"HTTP {response.status_code} from {response.request.url}: {response.text[:300]}",
            status=response.status_code,
        ) from None
    raise _error(response.status_code, code, message, details)


def _error(status: int, code: str, message: str, details: Mapping[str, Any]) -> Exception:
    if code == errors.DeployRefusedError.code:
        from keepgoing._groups.replaycheck import ReplayReport  # noqa: PLC0415

        report = details.get("report")
        return errors.DeployRefusedError(
            message, ReplayReport.from_body(report) if isinstance(report, dict) else None
        )
    if code == errors.WorkflowAlreadyRunningError.code:
        running = errors.WorkflowAlreadyRunningError(
            str(details.get("workflow_id", "")), str(details.get("run_id", ""))
        )
        notes = details.get("notes")
        for note in notes if isinstance(notes, list) else ():
            running.add_note(str(note))  # which start of a batch it was
        return running
    if code == errors.ReuseRefusedError.code:
        return errors.ReuseRefusedError(
            message, str(details.get("workflow_id", "")), str(details.get("run_id", ""))
        )
    if status >= 500:
        return errors.ServerError(f"the server failed: {message}", status=status, error_code=code)
    cls = _CODES.get(code)
    if cls is not None:
        return cls(message)
    return errors.InvalidRequestError(f"HTTP {status} {code}: {message}")
