"""The HTTP backend: :class:`keepgoing.Client` talking to a server.

Retries: a network failure or a 5xx answer is retried with exponential
backoff and jitter, but only for calls that are safe to repeat — reads,
cancels, starts (each carries a ``request_id`` idempotency key) and event
publishes (each carries an ``event_id``). A message send is not repeated:
its failure is reported, since the server may have stored it.

Every error the server answers with maps back to the ``keepgoing.errors``
class of its ``code``; anything else is a :class:`~keepgoing.errors.ServerError`.
The call itself (retries, decoding, errors) is ``keepgoing/_client/http_call.py``.
What each call does and raises is documented once, on :class:`keepgoing.Client`.
"""

from __future__ import annotations

import dataclasses
import urllib.parse
import uuid
from collections.abc import Mapping
from typing import Any

import httpx

from keepgoing import errors
from keepgoing._client.http_call import API, HttpCalls
from keepgoing._client.requests import (
    AuditQuery,
    EventSend,
    MessageSend,
    RunHere,
    RunQuery,
    RunRef,
    Start,
    StartMany,
)
from keepgoing._client.runs import RunsPage, WorkflowRun, WorkflowRunHandle
from keepgoing._clock import system_clock
from keepgoing._history.codec import decode
from keepgoing._history.events import ErrorInfo, Event
from keepgoing._payload import check_json
from keepgoing._store.inspect_protocol import RunFilter
from keepgoing._store.protocol import Store
from keepgoing._store.records import AuditEntry, WorkerRecord
from keepgoing._store.trouble import Trouble
from keepgoing._views import operations
from keepgoing._views.batch import (
    batch_lists,
    check_id,
    check_request_id,
    naming,
    refuse_repeats,
)
from keepgoing._views.catalog import StartWarning
from keepgoing._views.operations import Operation
from keepgoing._workflow.workflow import WorkflowDefinition

__all__ = ["HttpBackend"]

_POLL = 25.0  # seconds per long poll; the server caps it at 60
_CHECK_TIMEOUT = 90.0  # seconds: a fork's check waits up to the server's long-poll cap


class HttpBackend(HttpCalls):
    """The :class:`~keepgoing._client.backend.Backend` over the HTTP API.

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
    def store(self) -> Store:
        raise errors.ConfigurationError(
            f"this client talks to the server at {self.url}; it has no store of its own"
        )

    def close(self) -> None:
        self._http.close()

    # -- runs -------------------------------------------------------------------------
    def start(self, request: Start) -> tuple[WorkflowRunHandle, StartWarning | None]:
        """Checks the input here, then starts with a ``request_id`` (safe to retry)."""
        value = request.input
        name = _checked_input(request.workflow, value)
        body = {
            "workflow": name,
            "input": value,
            "workflow_id": request.workflow_id,
            "task_queue": request.task_queue,
            "request_id": request.request_id or uuid.uuid4().hex,  # makes it safe to retry
        }
        if request.strict:
            body["strict"] = True
        found = self.call("POST", f"{API}/runs", idempotent=True, json=body)
        handle = WorkflowRunHandle(found["workflow_name"], found["workflow_id"], found["run_id"])
        return handle, _warning(found)

    def start_many(self, request: StartMany) -> tuple[list[WorkflowRunHandle], StartWarning | None]:
        """Checks the batch here as the store backend does, then starts it in one
        request with a ``request_id`` per run (so a retry starts nothing twice)."""
        inputs, ids, given = batch_lists(request.inputs, request.workflow_ids, request.request_ids)
        if not inputs:
            return [], None
        workflow = request.workflow
        if request.task_queue is not None:
            check_id(request.task_queue, "task_queue")
        request_ids: list[str] = []
        for i, value in enumerate(inputs):
            with naming(i):
                name = _checked_input(workflow, value)
                request_ids.append(
                    check_request_id(given[i]) if given is not None else uuid.uuid4().hex
                )
                if ids is not None:
                    check_id(ids[i], "workflow_id")
        refuse_repeats(request_ids, "request_id")
        if ids is not None:
            refuse_repeats(ids, "workflow_id")
        body: dict[str, Any] = {
            "workflow": name,
            "inputs": inputs,
            "workflow_ids": ids,
            "request_ids": request_ids,
            "task_queue": request.task_queue,
        }
        if request.strict:
            body["strict"] = True
        found = self.call("POST", f"{API}/run-batches", idempotent=True, json=body)
        handles = [
            WorkflowRunHandle(r["workflow_name"], r["workflow_id"], r["run_id"])
            for r in found["runs"]
        ]
        return handles, _warning(found)

    def start_and_wait(self, request: Start, timeout: float | None) -> WorkflowRun:
        handle, _ = self.start(request)  # a name's warning is given by the caller, not here
        return self.wait(RunRef(handle.workflow_id, handle.run_id), timeout)

    def run_here(self, request: RunHere) -> WorkflowRun:
        """Not available over HTTP: it runs tasks in this process against the store."""
        raise errors.ConfigurationError(
            "run_workflow runs the tasks in this process and needs the store; use "
            "Client(store=...) for it, or trigger_workflow(..., wait=True) with a worker"
        )

    def wait(self, run: RunRef, timeout: float | None) -> WorkflowRun:
        """Long polls the server until the run ends."""
        wanted = run.workflow_id
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
                params={"run_id": run.run_id, "timeout": round(left, 3)},
                timeout=left + 30.0,
            )
            current = _run(found["run"])
            if found["done"]:
                return current
            if deadline is not None and system_clock.monotonic() >= deadline:
                raise TimeoutError(f"run {current.run_id} of {wanted!r} is still {current.status}")

    def get_run(self, run: RunRef) -> WorkflowRun:
        found = self.call(
            "GET",
            f"{API}/runs/{_path(run.workflow_id)}",
            idempotent=True,
            params={"run_id": run.run_id},
        )
        return _run(found)

    def history(self, run: RunRef) -> list[Event]:
        found = self.call(
            "GET",
            f"{API}/runs/{_path(run.workflow_id)}/history",
            idempotent=True,
            params={"run_id": run.run_id},
        )
        return [decode(body) for body in found["events"]]

    def list_runs(self, query: RunQuery) -> list[WorkflowRun]:
        params = {
            "workflow": query.workflow_name,
            "status": query.status,
            "limit": query.limit,
            "offset": query.offset,
            "created_after": query.created_after,
            "created_before": query.created_before,
        }
        found = self.call("GET", f"{API}/runs", idempotent=True, params=params)
        return [_run(r) for r in found["runs"]]

    # -- messages, events, cancellation ------------------------------------------------
    def send_message(self, message: MessageSend) -> str:
        """Not retried: a lost answer may hide a stored message."""
        check_json(message.payload, f"the payload of message {message.name!r}")
        found = self.call(
            "POST",
            f"{API}/runs/{_path(message.run.workflow_id)}/messages",
            idempotent=False,
            json={"name": message.name, "payload": message.payload, "run_id": message.run.run_id},
        )
        return str(found["message_id"])

    def publish_event(self, event: EventSend) -> str:
        check_json(event.payload, f"the payload of event {event.event_type!r}")
        body = {
            "event_type": event.event_type,
            "correlation_id": event.correlation_id,
            "payload": event.payload,
            "event_id": event.event_id or uuid.uuid4().hex,  # makes the publish safe to retry
        }
        found = self.call("POST", f"{API}/events", idempotent=True, json=body)
        return str(found["event_id"])

    def cancel(self, run: RunRef, reason: str | None) -> None:
        self.call(
            "POST",
            f"{API}/runs/{_path(run.workflow_id)}/cancel",
            idempotent=True,
            json={"reason": reason, "run_id": run.run_id},
        )

    def unblock(self, run: RunRef) -> WorkflowRun:
        found = self.call(
            "POST",
            f"{API}/runs/{_path(run.workflow_id)}/unblock",
            idempotent=True,
            json={"run_id": run.run_id},
        )
        return _run(found["run"])

    def get_status(self, workflow_id: str, key: str, wait: float | None) -> tuple[bool, Any]:
        deadline = None if wait is None else system_clock.monotonic() + wait
        while True:  # long polls of at most a minute each, until ``wait`` has passed
            left = None if deadline is None else max(0.0, deadline - system_clock.monotonic())
            params: dict[str, Any] = {"key": key}
            if left is not None:
                params["wait"] = min(left, 60.0)
            found = self.call(
                "GET",
                f"{API}/runs/{_path(workflow_id)}/status",
                idempotent=True,
                params=params,
                timeout=None if left is None else min(left, 60.0) + 30.0,
            )
            value = found["values"].get(key)
            if value is not None:
                return True, value["value"]
            if left is None or left <= 0 or found["ended"]:
                return False, None

    def resume(self, workflow_id: str, revision: int | None) -> WorkflowRunHandle:
        found = self.call(
            "POST",
            f"{API}/runs/{_path(workflow_id)}/resume",
            idempotent=False,
            json={"revision": revision},
        )
        run = found["run"]
        return WorkflowRunHandle(run["workflow_name"], run["workflow_id"], run["run_id"])

    def fork(
        self,
        source_id: str,
        from_step: int,
        input: Any,
        workflow_id: str | None,
        revision: int | None,
        wait_for_check: bool = False,
    ) -> WorkflowRunHandle:
        body: dict[str, Any] = {"from_step": from_step, "revision": revision}
        if input is not None:
            body["input"] = input
        if workflow_id is not None:
            body["workflow_id"] = workflow_id
        if wait_for_check:
            body["wait_for_check"] = True
        found = self.call(
            "POST",
            f"{API}/runs/{_path(source_id)}/fork",
            idempotent=False,
            json=body,
            timeout=_CHECK_TIMEOUT if wait_for_check else None,
        )
        run = found["run"]
        checked = found.get("check")
        while checked == "pending":  # the server waited its longest: ask again, idempotent
            again = self.call(
                "GET",
                f"{API}/runs/{_path(run['workflow_id'])}/check",
                idempotent=True,
                params={"wait": _POLL},
                timeout=_CHECK_TIMEOUT,
            )
            checked = again["check"]
        return WorkflowRunHandle(run["workflow_name"], run["workflow_id"], run["run_id"])

    def lineage(self, workflow_id: str) -> dict[str, Any]:
        found = self.call("GET", f"{API}/runs/{_path(workflow_id)}/lineage", idempotent=True)
        return {
            "run": _run(found["run"]),
            "parent": _run(found["parent"]) if found["parent"] else None,
            "children": [_run(c) for c in found["children"]],
            "origin": found.get("origin"),
            "derived": found.get("derived", []),
        }

    def list_audit(self, query: AuditQuery) -> list[AuditEntry]:
        params = {
            "limit": query.limit,
            "offset": query.offset,
            "action": query.action,
            "workflow_id": query.workflow_id,
        }
        found = self.call("GET", f"{API}/audit", idempotent=True, params=params)
        return [AuditEntry(**entry) for entry in found["entries"]]

    # -- the runs list, logs, kills ------------------------------------------------------
    def page_runs(
        self, filters: RunFilter, *, limit: int = 50, cursor: str | None = None
    ) -> RunsPage:
        params = {**_filter_params(filters), "limit": limit, "cursor": cursor}
        found = self.call("GET", f"{API}/runs", idempotent=True, params=params)
        return RunsPage([_run(r) for r in found["runs"]], found.get("next_cursor"))

    def count_runs(self, filters: RunFilter) -> dict[str, int]:
        found = self.call(
            "GET", f"{API}/run-counts", idempotent=True, params=_filter_params(filters)
        )
        return dict(found["counts"])

    def count_trouble(self, filters: RunFilter) -> dict[str, int]:
        found = self.call(
            "GET", f"{API}/run-counts", idempotent=True, params=_filter_params(filters)
        )
        return dict(found.get("trouble") or {})

    def attempt_logs(
        self,
        workflow_id: str,
        *,
        run_id: str | None = None,
        cmd: int | None = None,
        attempt: int | None = None,
    ) -> list[dict[str, Any]]:
        params = {"run_id": run_id, "cmd": cmd, "attempt": attempt}
        found = self.call(
            "GET", f"{API}/runs/{_path(workflow_id)}/logs", idempotent=True, params=params
        )
        return list(found["logs"])

    def kill_worker(self, worker_id: str, *, via: str = "api") -> dict[str, Any]:
        """Not retried: a kill is done once."""
        found: dict[str, Any] = self.call(
            "POST", f"{API}/workers/{_path(worker_id)}/kill", idempotent=False, json={"via": via}
        )
        return found

    # -- operations ---------------------------------------------------------------------
    def get_operation(self, operation_id: str) -> Operation:
        operations.parse_operation_id(operation_id)  # a clear error before any request
        found = self.call("GET", f"{API}/operations/{_path(operation_id)}", idempotent=True)
        return _operation(found)

    def list_reviews(self, limit: int) -> list[Operation]:
        found = self.call("GET", f"{API}/reviews", idempotent=True, params={"limit": limit})
        return [_operation(o) for o in found["operations"]]

    def review_operation(
        self, operation_id: str, decision: str, result: Any, reason: str | None
    ) -> Operation:
        """Not retried: a lost answer may hide a decision that was sent."""
        operations.parse_operation_id(operation_id)
        check_json(result, f"the result approved for operation {operation_id!r}")
        found = self.call(
            "POST",
            f"{API}/operations/{_path(operation_id)}/review",
            idempotent=False,
            json={"decision": decision, "result": result, "reason": reason},
        )
        return _operation(found)

    # -- workers, queues, tokens --------------------------------------------------------
    def list_workers(self) -> list[WorkerRecord]:
        found = self.call("GET", f"{API}/workers", idempotent=True)
        # A server from before lost workers were kept apart sends no "lost" list.
        return [WorkerRecord(**w) for w in [*found["workers"], *found.get("lost", ())]]

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


def _filter_params(f: RunFilter) -> dict[str, Any]:
    return {
        "status": ",".join(f.statuses) or None,
        "workflow": f.workflow_name,
        "since": f.since,
        "until": f.until,
        "id": f.id,
        "q": f.text,
        "needs_patch": f.needs_patch,
        "revision": f.revision,
        "trouble": ",".join(f.trouble) or None,
    }


def _path(value: str) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"an id must be a non-empty string, not {value!r}")
    # `/` too: in a workflow id it is data (the server routes on the raw path), and
    # `t/history` sent as it is would name the history of run `t`.
    return urllib.parse.quote(value, safe=":@+=")


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
        code_versions=tuple(body.get("code_versions", ())),
        waiting_for=body.get("waiting_for"),
        group_revision=body.get("group_revision"),
        trouble=_trouble(body.get("trouble")),
        schedule_id=body.get("schedule_id"),
        schedule_slot=body.get("schedule_slot"),
    )


def _trouble(body: Any) -> Trouble:
    """The counters of a run view (a server from before them sends none)."""
    if not isinstance(body, dict):
        return Trouble()
    names = {f.name for f in dataclasses.fields(Trouble)}
    return Trouble(**{k: int(v) for k, v in body.items() if k in names})


def _operation(body: dict[str, Any]) -> Operation:
    fields = {f.name for f in dataclasses.fields(Operation)}
    known = {k: v for k, v in body.items() if k in fields}
    known["rounds"] = tuple(known.get("rounds", ()))
    known["reviews"] = tuple(known.get("reviews", ()))
    return Operation(**known)


def _checked_input(workflow: WorkflowDefinition[..., Any] | str, value: Any) -> str:
    """The workflow's name, once its input is checked here rather than on the server."""
    if isinstance(workflow, WorkflowDefinition):
        workflow.bind_input(value)
        return workflow.name
    if isinstance(workflow, str) and workflow:
        check_json(value, f"input of workflow {workflow!r}")
        return workflow
    raise TypeError(
        f"trigger_workflow needs a @workflow or its name, not {type(workflow).__name__}"
    )


def _warning(found: dict[str, Any]) -> StartWarning | None:
    text = found.get("warning")
    if not isinstance(text, str):
        return None
    return StartWarning(text, str(found.get("warning_code") or errors.UnknownWorkflowWarning.code))
