"""Child workflows, external events, continue-as-new and the ids a workflow can see."""

from __future__ import annotations

import asyncio
from collections.abc import Generator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from keepgoing._durations import Duration, parse_duration
from keepgoing._history import events as ev
from keepgoing._payload import MAX_DEPTH, plain
from keepgoing._runtime.waits import ContinueAsNew
from keepgoing._workflow.messages import check_name, require_workflow, send_message
from keepgoing._workflow.registry import registry
from keepgoing._workflow.workflow import WorkflowDefinition
from keepgoing.errors import PayloadError, WorkflowMessageTimeoutError

__all__ = [
    "ChildHandle",
    "ExternalEvent",
    "continue_as_new",
    "parent_workflow_id",
    "start_child",
    "wait_for_event",
]


class ChildHandle:
    """A running child workflow. ``await handle`` gives its result or raises its error."""

    def __init__(self, workflow_id: str, run_id: str, ended: asyncio.Future[Any]) -> None:
        self.workflow_id = workflow_id
        self.run_id = run_id
        self._ended = ended

    def __await__(self) -> Generator[Any, None, Any]:
        return self._ended.__await__()

    def done(self) -> bool:
        return self._ended.done()

    async def send_message(self, name: str, payload: Any = None) -> str:
        """Send the child a message (``sender_kind="workflow"``)."""
        return await send_message(self.workflow_id, name, payload)

    def __repr__(self) -> str:
        return f"<ChildHandle {self.workflow_id} run {self.run_id}>"


async def start_child(
    workflow_or_name: WorkflowDefinition[..., Any] | str,
    inputs: Mapping[str, Any] | None = None,
    *,
    workflow_id: str | None = None,
) -> ChildHandle:
    """Start a child workflow with its own history, on the parent's task queue.

    The default child id is ``<parent id>/<child name>-<n>``, unique per call.
    The child's lifetime is bounded by the parent's: when the parent ends, a
    running child is cancelled and its ``finally`` blocks run.

    Raises:
        WorkflowAlreadyRunningError: a workflow with that id is running.
        WorkflowNotFoundError: no workflow with that name is defined in this code.
        PayloadError: ``inputs`` are not JSON.
        RuntimeError: outside a workflow.
    """
    instance = require_workflow("start_child()")
    if isinstance(workflow_or_name, WorkflowDefinition):
        name = workflow_or_name.name
        document = workflow_or_name.bind_input(inputs)
    else:
        name = check_name(workflow_or_name, "the child workflow name")
        # The child runs on the parent's queue, served by workers with this code.
        registry.workflow(name)  # WorkflowNotFoundError for a name nobody can run
        if inputs is not None and not isinstance(inputs, Mapping):
            raise PayloadError(f"inputs of child {name!r} must be a mapping of parameter names")
        what = f"inputs of child workflow {name!r}"
        kwargs = plain(dict(inputs or {}), what, max_depth=MAX_DEPTH + 1)
        document = {"args": [], "kwargs": kwargs}
    if workflow_id is not None:
        check_name(workflow_id, "the child workflow id")

    def make(cmd: int) -> ev.Event:
        child_id = workflow_id or f"{instance.workflow_id}/{name}-{cmd}"
        return ev.ChildStarted(cmd=cmd, workflow_name=name, workflow_id=child_id, input=document)

    cmd = instance.command(make)
    started, ended = instance.waits.expect_child(cmd)
    run_id: str = await started
    child_id = workflow_id or f"{instance.workflow_id}/{name}-{cmd}"
    return ChildHandle(child_id, run_id, ended)


def parent_workflow_id() -> str | None:
    """The parent's workflow id inside a child workflow; None in a top-level run.

    Raises:
        RuntimeError: outside a workflow.
    """
    return require_workflow("parent_workflow_id()").parent_workflow_id


@dataclass(frozen=True)
class ExternalEvent:
    """An event published with ``Client.publish_event`` that a wait received."""

    event_id: str
    event_type: str
    correlation_id: str
    payload: Any
    published_at: datetime


async def wait_for_event(
    event_type: str, correlation_id: str, *, timeout: Duration | None = None
) -> ExternalEvent:
    """Wait durably for an external event addressed by type and correlation id.

    The wait's type, correlation id and deadline are stored and the worker is
    released. An event published before the wait started is matched at once;
    repeated deliveries of one ``event_id`` never advance the run twice.

    Raises:
        WorkflowMessageTimeoutError: ``timeout`` passed first (a ``TimeoutError``).
        RuntimeError: outside a workflow.
    """
    instance = require_workflow("wait_for_event()")
    check_name(event_type, "the event type")
    check_name(correlation_id, "the correlation id")
    seconds = None if timeout is None else parse_duration(timeout, what="timeout")
    deadline = None if seconds is None else instance.loop.time() + seconds
    cmd = instance.command(
        lambda cmd: ev.EventWaitStarted(
            cmd=cmd, event_type=event_type, correlation_id=correlation_id, deadline=deadline
        )
    )
    future = instance.waits.expect(cmd)
    future.add_done_callback(
        lambda f: f.cancelled() and instance.command(lambda _: ev.EventWaitCancelled(cmd=cmd))
    )
    try:
        received = await (future if seconds is None else asyncio.wait_for(future, seconds))
    except TimeoutError:
        raise WorkflowMessageTimeoutError(
            f"no {event_type!r} event for {correlation_id!r} arrived within {seconds:g}s"
        ) from None
    return ExternalEvent(
        event_id=received.event_id,
        event_type=received.event_type,
        correlation_id=received.correlation_id,
        payload=received.payload,
        published_at=datetime.fromtimestamp(received.published_at, UTC),
    )


def continue_as_new(**inputs: Any) -> None:
    """End this run and start a new one of the same workflow, with the same id,
    a fresh history and ``inputs``. The two runs are linked.

    Unconsumed messages stay with the old run: drain them first.

    Raises:
        PayloadError: ``inputs`` are not JSON.
        RuntimeError: outside a workflow.
    """
    require_workflow("continue_as_new()")
    kwargs = plain(inputs, "the inputs of continue_as_new", max_depth=MAX_DEPTH + 1)
    raise ContinueAsNew({"args": [], "kwargs": kwargs})
