"""The client's HTTP mode: the same methods as :class:`StoreClient`, through a server.

Retries: a network failure or a 5xx answer is retried with exponential
backoff and jitter, but only for calls that are safe to repeat — reads,
cancels, starts (each carries a ``request_id`` idempotency key) and event
publishes (each carries an ``event_id``). A message send is not repeated:
its failure is reported, since the server may have stored it.

Every error the server answers with maps back to the ``keepgoing.errors``
class of its ``code``; anything else is a :class:`~keepgoing.errors.ServerError`.
"""

from __future__ import annotations

import random
import time
import urllib.parse
import uuid
from collections.abc import Mapping
from typing import Any

import httpx

from keepgoing import errors
from keepgoing._api.runs import WorkflowRun, WorkflowRunHandle
from keepgoing._api.workflow import WorkflowDefinition
from keepgoing._clock import system_clock
from keepgoing._history.codec import decode
from keepgoing._history.events import ErrorInfo, Event
from keepgoing._payload import check_json
from keepgoing._store.records import AuditEntry, WorkerRecord

__all__ = ["HttpClient"]

API = "/api/v1"
_MAX_BACKOFF = 5.0
_POLL = 25.0  # seconds per long poll; the server caps it at 60

_CODES: dict[str, type[errors.KeepgoingError]] = {
    cls.code: cls
    for cls in (
        errors.ConfigurationError,
        errors.InvalidDurationError,
        errors.DuplicateNameError,
        errors.PayloadError,
        errors.PayloadTooLargeError,
        errors.InvalidRequestError,
        errors.AuthenticationError,
        errors.PermissionDeniedError,
        errors.TokenNotFoundError,
        errors.WorkflowNotFoundError,
        errors.RunNotFoundError,
        errors.WorkflowNotRunningError,
        errors.VolumeError,
        errors.VolumeNotFoundError,
        errors.VolumeFileNotFoundError,
        errors.StoreError,
    )
}


class HttpClient:
    """:class:`keepgoing.Client` when it talks to a server.

    Args:
        url: the server, e.g. ``http://127.0.0.1:8711``.
        token: the API token (``kg_...``).
        timeout: seconds per HTTP request (long polls add their own wait).
        retries: extra attempts for idempotent calls.
        backoff: the first retry's delay in seconds; doubles, capped at 5 s.
        transport: an ``httpx`` transport, for tests.
    """

    def __init__(
        self,
        url: str,
        token: str | None = None,
        *,
        timeout: float = 30.0,
        retries: int = 4,
        backoff: float = 0.2,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise errors.ConfigurationError(
                f"the server URL must start with http:// or https://, not {url!r}"
            )
        if retries < 0 or backoff < 0 or timeout <= 0:
            raise errors.ConfigurationError("retries and backoff must be >= 0, timeout > 0")
        self.url = url.rstrip("/")
        self.retries = retries
        self.backoff = backoff
        headers = {"User-Agent": "keepgoing-client"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self._http = httpx.Client(
            base_url=self.url, headers=headers, timeout=timeout, transport=transport
        )

    @property
    def store(self) -> Any:
        raise errors.ConfigurationError(
            f"this client talks to the server at {self.url}; it has no store of its own"
        )

    def close(self) -> None:
        self._http.close()

    # -- transport -----------------------------------------------------------------
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
        delay = min(self.backoff * 2**attempt, _MAX_BACKOFF)
        time.sleep(delay * random.uniform(0.8, 1.2))

    # -- runs -------------------------------------------------------------------------
    def trigger_workflow(
        self,
        workflow_or_name: WorkflowDefinition[..., Any] | str,
        input: Any = None,
        *,
        workflow_id: str | None = None,
        task_queue: str | None = None,
        wait: bool = False,
        timeout: float | None = None,
    ) -> Any:
        """Start a run; return its :class:`WorkflowRunHandle`, or with ``wait=True`` its result."""
        if isinstance(workflow_or_name, WorkflowDefinition):
            workflow_or_name.bind_input(input)  # refuse bad input here, not on the server
            name = workflow_or_name.name
        elif isinstance(workflow_or_name, str) and workflow_or_name:
            name = workflow_or_name
            check_json(input, f"input of workflow {name!r}")
        else:
            raise TypeError(
                "trigger_workflow needs a @workflow or its name, "
                f"not {type(workflow_or_name).__name__}"
            )
        body = {
            "workflow": name,
            "input": input,
            "workflow_id": workflow_id,
            "task_queue": task_queue,
            "request_id": uuid.uuid4().hex,  # makes the start safe to retry
        }
        found = self.call("POST", f"{API}/runs", idempotent=True, json=body)
        handle = WorkflowRunHandle(found["workflow_name"], found["workflow_id"], found["run_id"])
        return self.result(handle, timeout=timeout) if wait else handle

    def run_workflow(
        self,
        workflow: WorkflowDefinition[..., Any],
        input: Any = None,
        *,
        workflow_id: str | None = None,
    ) -> Any:
        """Not available over HTTP: it runs tasks in this process against the store."""
        raise errors.ConfigurationError(
            "run_workflow runs the tasks in this process and needs the store; use "
            "Client(store=...) for it, or trigger_workflow(..., wait=True) with a worker"
        )

    def result(
        self,
        workflow_id: str | WorkflowRunHandle,
        *,
        run_id: str | None = None,
        timeout: float | None = None,
    ) -> Any:
        """Wait (with long polls) for the run to end and return its result.

        Raises:
            WorkflowFailedError: the run failed or was cancelled.
            WorkflowBlockedError: the run is blocked on a determinism error.
            TimeoutError: ``timeout`` seconds passed first.
        """
        if isinstance(workflow_id, WorkflowRunHandle):
            run_id = workflow_id.run_id
            workflow_id = workflow_id.workflow_id
        wanted: str = workflow_id
        deadline = None if timeout is None else system_clock.monotonic() + timeout
        while True:
            left = (
                _POLL
                if deadline is None
                else max(0.0, min(_POLL, deadline - system_clock.monotonic()))
            )
            found = self.call(
                "GET",
                f"{API}/runs/{_path(wanted)}/result",
                idempotent=True,
                params={"run_id": run_id, "timeout": round(left, 3)},
                timeout=left + 30.0,
            )
            run = _run(found["run"])
            if found["done"]:
                return _outcome(run)
            if deadline is not None and system_clock.monotonic() >= deadline:
                raise TimeoutError(f"run {run.run_id} of {wanted!r} is still {run.status}")

    def get_run(self, workflow_id: str, *, run_id: str | None = None) -> WorkflowRun:
        found = self.call(
            "GET", f"{API}/runs/{_path(workflow_id)}", idempotent=True, params={"run_id": run_id}
        )
        return _run(found)

    def history(self, workflow_id: str, *, run_id: str | None = None) -> list[Event]:
        found = self.call(
            "GET",
            f"{API}/runs/{_path(workflow_id)}/history",
            idempotent=True,
            params={"run_id": run_id},
        )
        return [decode(body) for body in found["events"]]

    def list_runs(
        self,
        *,
        workflow: str | WorkflowDefinition[..., Any] | None = None,
        status: str | None = None,
        limit: int = 50,
        offset: int = 0,
        created_after: float | None = None,
        created_before: float | None = None,
    ) -> list[WorkflowRun]:
        name = workflow.name if isinstance(workflow, WorkflowDefinition) else workflow
        params = {
            "workflow": name,
            "status": status,
            "limit": limit,
            "offset": offset,
            "created_after": created_after,
            "created_before": created_before,
        }
        found = self.call("GET", f"{API}/runs", idempotent=True, params=params)
        return [_run(r) for r in found["runs"]]

    # -- messages, events, cancellation ------------------------------------------------
    def send_workflow_message(
        self, workflow_id: str, name: str, payload: Any = None, *, run_id: str | None = None
    ) -> str:
        """Send a message; the server stamps the sender from this client's token.

        Not retried: a lost answer may hide a stored message.
        """
        check_json(payload, f"the payload of message {name!r}")
        found = self.call(
            "POST",
            f"{API}/runs/{_path(workflow_id)}/messages",
            idempotent=False,
            json={"name": name, "payload": payload, "run_id": run_id},
        )
        return str(found["message_id"])

    def publish_event(
        self,
        event_type: str,
        correlation_id: str,
        payload: Any = None,
        *,
        event_id: str | None = None,
    ) -> str:
        check_json(payload, f"the payload of event {event_type!r}")
        body = {
            "event_type": event_type,
            "correlation_id": correlation_id,
            "payload": payload,
            "event_id": event_id or uuid.uuid4().hex,  # makes the publish safe to retry
        }
        found = self.call("POST", f"{API}/events", idempotent=True, json=body)
        return str(found["event_id"])

    def cancel_workflow(
        self, workflow_id: str, reason: str | None = None, *, run_id: str | None = None
    ) -> None:
        self.call(
            "POST",
            f"{API}/runs/{_path(workflow_id)}/cancel",
            idempotent=True,
            json={"reason": reason, "run_id": run_id},
        )

    def lineage(self, workflow_id: str) -> dict[str, Any]:
        found = self.call("GET", f"{API}/runs/{_path(workflow_id)}/lineage", idempotent=True)
        return {
            "run": _run(found["run"]),
            "parent": _run(found["parent"]) if found["parent"] else None,
            "children": [_run(c) for c in found["children"]],
        }

    def list_audit(
        self,
        *,
        limit: int = 100,
        offset: int = 0,
        action: str | None = None,
        workflow_id: str | None = None,
    ) -> list[AuditEntry]:
        params = {"limit": limit, "offset": offset, "action": action, "workflow_id": workflow_id}
        found = self.call("GET", f"{API}/audit", idempotent=True, params=params)
        return [AuditEntry(**entry) for entry in found["entries"]]

    # -- workers, queues, tokens --------------------------------------------------------
    def list_workers(self) -> list[WorkerRecord]:
        found = self.call("GET", f"{API}/workers", idempotent=True)
        return [WorkerRecord(**w) for w in found["workers"]]

    def list_queues(self) -> list[dict[str, Any]]:
        found = self.call("GET", f"{API}/queues", idempotent=True)
        return list(found["queues"])

    def create_token(self, name: str, kind: str, permissions: list[str]) -> dict[str, Any]:
        """``{"token": <secret, shown once>, "info": {...}}``; needs ``admin``."""
        body = {"name": name, "kind": kind, "permissions": permissions}
        found: dict[str, Any] = self.call("POST", f"{API}/tokens", idempotent=False, json=body)
        return found

    def list_tokens(self, *, include_revoked: bool = False) -> list[dict[str, Any]]:
        found = self.call(
            "GET", f"{API}/tokens", idempotent=True, params={"include_revoked": include_revoked}
        )
        return list(found["tokens"])

    def revoke_token(self, token_id: str) -> dict[str, Any]:
        found: dict[str, Any] = self.call(
            "DELETE", f"{API}/tokens/{_path(token_id)}", idempotent=True
        )
        return found


def _path(value: str) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"an id must be a non-empty string, not {value!r}")
    return urllib.parse.quote(value, safe="/:@+=")


def _run(body: Mapping[str, Any]) -> WorkflowRun:
    error = body.get("error")
    return WorkflowRun(
        workflow_name=body["workflow_name"],
        workflow_id=body["workflow_id"],
        run_id=body["run_id"],
        status=body["status"],
        input=body["input"],
        result=body.get("result"),
        error=ErrorInfo(**error) if error else None,
        task_queue=body["task_queue"],
        code_version=body["code_version"],
        created_at=body["created_at"],
        updated_at=body["updated_at"],
        ended_at=body.get("ended_at"),
        blocked_reason=body.get("blocked_reason"),
    )


def _outcome(run: WorkflowRun) -> Any:
    """The result of an ended run, or the error that says why there is none."""
    if run.status == "completed":
        return run.result
    if run.status == "blocked":
        raise errors.WorkflowBlockedError(f"run {run.run_id} is blocked:\n{run.blocked_reason}")
    error = run.error
    raise errors.WorkflowFailedError(
        run.run_id,
        error.type if error else run.status,
        error.message if error else f"the run was {run.status}",
    )


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
    if code == errors.WorkflowAlreadyRunningError.code:
        return errors.WorkflowAlreadyRunningError(
            str(details.get("workflow_id", "")), str(details.get("run_id", ""))
        )
    if status >= 500:
        return errors.ServerError(f"the server failed: {message}", status=status, error_code=code)
    cls = _CODES.get(code)
    if cls is not None:
        return cls(message)
    return errors.InvalidRequestError(f"HTTP {status} {code}: {message}")
