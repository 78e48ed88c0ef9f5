"""Messages to runs and external events. The sender is the caller's token, always."""

from __future__ import annotations

import uuid

from fastapi import APIRouter, Request

from keepgoing._payload import check_message_payload
from keepgoing._server.auth import PublishesEvents, SendsMessages
from keepgoing._server.context import context
from keepgoing._server.routes._common import (
    PREFIX,
    STRICT,
    WorkflowIdPath,
    check_depth,
    documented,
)
from keepgoing._server.schemas import EventBody, EventResult, MessageBody, MessageResult
from keepgoing._store.records import EventRequest, MessageRequest

__all__ = ["router"]

router = APIRouter(prefix=PREFIX, tags=["messages"], dependencies=STRICT)


@router.post(
    "/runs/{workflow_id:kgid}/messages",
    status_code=202,
    response_model=MessageResult,
    responses=documented(404, 409, reads=False),
    summary="Send a message to a run",
)
async def send_message(
    workflow_id: WorkflowIdPath,
    body: MessageBody,
    request: Request,
    principal: SendsMessages,
) -> MessageResult:
    """Deliver a message to the open run of the workflow id (`wait_for_message` gets it).

    The sender is set from the token: `sender_kind` is `user` (with the user's
    id) or `service_token` (with the token's id); sender fields in the body are
    ignored. The payload is JSON of at most 256 KiB (413 above). A run that has
    ended is a 409. Every send is in the audit log.
    """
    ctx = context(request)
    check_depth(body.payload, f"the payload of message {body.name!r}")
    check_message_payload(body.payload, f"the payload of message {body.name!r}")
    message_id = await ctx.store.send_message(
        MessageRequest(
            workflow_id=workflow_id,
            name=body.name,
            payload=body.payload,
            sender_kind=principal.kind,
            sender_id=principal.id,
            now=ctx.clock.now(),
            run_id=body.run_id,
        )
    )
    return MessageResult(
        message_id=message_id,
        workflow_id=workflow_id,
        sender_kind=principal.kind,
        sender_id=principal.id,
    )


@router.post(
    "/events",
    status_code=202,
    response_model=EventResult,
    responses=documented(reads=False),
    summary="Publish an external event",
)
async def publish_event(
    body: EventBody, request: Request, principal: PublishesEvents
) -> EventResult:
    """Store an event and deliver it to the runs waiting on its type and correlation id.

    Publishing an `event_id` again changes nothing (`duplicate: true`), so a
    delivery can be retried safely. An event with no waiter yet is kept and
    matched when a wait starts.
    """
    ctx = context(request)
    check_depth(body.payload, f"the payload of event {body.event_type!r}")
    check_message_payload(body.payload, f"the payload of event {body.event_type!r}")
    published = await ctx.store.publish_event(
        EventRequest(
            event_type=body.event_type,
            correlation_id=body.correlation_id,
            payload=body.payload,
            event_id=body.event_id or uuid.uuid4().hex,
            actor_kind=principal.kind,
            actor_id=principal.id,
            now=ctx.clock.now(),
        )
    )
    return EventResult(
        event_id=published.event_id,
        duplicate=published.duplicate,
        matched_runs=list(published.matched_runs),
    )
