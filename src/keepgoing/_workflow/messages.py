"""Messages: ``wait_for_message``, ``send_message`` and ``local_messages``."""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from keepgoing._durations import Duration, parse_duration
from keepgoing._history import events as ev
from keepgoing._payload import check_json, message_payload
from keepgoing._runtime.context import current_instance
from keepgoing._runtime.instance import WorkflowInstance
from keepgoing.errors import WorkflowMessageTimeoutError

__all__ = [
    "WorkflowMessage",
    "check_name",
    "check_sendable",
    "local_messages",
    "pending_local_messages",
    "require_workflow",
    "send_message",
    "wait_for_message",
]


@dataclass(frozen=True)
class WorkflowMessage:
    """A message a workflow received.

    ``sender_kind`` is ``"user"``, ``"service_token"``, ``"workflow"`` or
    ``"local"``, and with ``sender_id`` is stamped by the orchestrator from the
    sender's credentials: a caller can never set it.
    """

    name: str
    payload: Any
    sender_kind: str
    sender_id: str
    sent_at: datetime
    message_id: str = ""

    @classmethod
    def from_event(cls, event: ev.MessageReceived) -> WorkflowMessage:
        return cls(
            name=event.name,
            payload=event.payload,
            sender_kind=event.sender_kind,
            sender_id=event.sender_id,
            sent_at=datetime.fromtimestamp(event.sent_at, UTC),
            message_id=event.message_id,
        )


def require_workflow(what: str) -> WorkflowInstance:
    instance = current_instance()
    if instance is None:
        raise RuntimeError(f"{what} works only inside a workflow")
    return instance


def check_name(name: object, what: str) -> str:
    if not isinstance(name, str) or not name or len(name) > 200:
        raise ValueError(f"{what} must be a non-empty string of at most 200 characters")
    check_json(name, what)  # a lone surrogate: PayloadError, as for any other text
    return name


def check_sendable(name: str, what: str) -> str:
    """A name a message may be sent under: ``review:...`` carries review decisions,
    which only ``review_operation`` sends."""
    if name.startswith(ev.REVIEW_PREFIX):
        raise ValueError(
            f"{what} {name[:60]!r} starts with {ev.REVIEW_PREFIX!r}, kept for review "
            "decisions: decide an uncertain operation with Client.review_operation "
            "(or keepgoing review)"
        )
    return name


async def wait_for_message(name: str, *, timeout: Duration | None = None) -> WorkflowMessage:
    """Wait durably for the next message called ``name``; no worker is held meanwhile.

    Messages sent before the wait are kept until it asks; messages with one
    name arrive in the order they were sent.

    Raises:
        WorkflowMessageTimeoutError: ``timeout`` passed first (a ``TimeoutError``).
        RuntimeError: outside a workflow.
    """
    instance = require_workflow("wait_for_message()")
    check_name(name, "the message name")
    seconds = None if timeout is None else parse_duration(timeout, what="timeout")
    instance.command(lambda cmd: ev.MessageWaitStarted(cmd=cmd, name=name, timeout=seconds))
    future = instance.waits.wait_message(name)
    try:
        if seconds is None:
            received = await future
        else:
            received = await asyncio.wait_for(future, seconds)
    except TimeoutError:
        raise WorkflowMessageTimeoutError(
            f"no message {name!r} arrived within {seconds:g}s"
        ) from None
    return WorkflowMessage.from_event(received)


async def send_message(workflow_id: str, name: str, payload: Any = None) -> str:
    """Send a message to another running workflow; returns the message id.

    Delivered by the orchestrator with ``sender_kind="workflow"`` and this
    workflow's id as ``sender_id``.

    Raises:
        WorkflowNotRunningError: the target workflow is not running.
        PayloadError: ``payload`` is not JSON or is over 256 KiB.
        RuntimeError: outside a workflow, or in a direct in-process call.
    """
    instance = require_workflow("send_message()")
    if instance.local:
        raise RuntimeError(
            "send_message() needs the orchestrator: a direct in-process call has no address "
            "to send to; run the workflow on a worker or with Client.run_workflow"
        )
    check_name(workflow_id, "the target workflow id")
    check_sendable(check_name(name, "the message name"), "the message name")
    payload = message_payload(payload, f"the payload of message {name!r}")
    cmd = instance.command(
        lambda cmd: ev.MessageSent(cmd=cmd, workflow_id=workflow_id, name=name, payload=payload)
    )
    message_id: str = await instance.waits.expect(cmd)
    return message_id


_local: contextvars.ContextVar[tuple[tuple[str, Any], ...]] = contextvars.ContextVar(
    "keepgoing_local_messages", default=()
)


@contextmanager
def local_messages(messages: Iterable[tuple[str, Any]]) -> Iterator[None]:
    """Queue messages for workflows run in-process inside this block.

    They arrive with ``sender_kind="local"``, in the order given.
    """
    queued = []
    for index, item in enumerate(messages):
        if not isinstance(item, tuple) or len(item) != 2:
            raise ValueError(f"local_messages item {index} must be a (name, payload) pair")
        name, payload = item
        check_sendable(check_name(name, f"the name of local message {index}"), "the name")
        queued.append((name, message_payload(payload, f"the payload of local message {name!r}")))
    token = _local.set(tuple(queued))
    try:
        yield
    finally:
        _local.reset(token)


def pending_local_messages() -> tuple[tuple[str, Any], ...]:
    return _local.get()
