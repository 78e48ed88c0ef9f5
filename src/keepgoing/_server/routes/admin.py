"""Tokens and the audit log (the ``admin`` permission)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Request

from keepgoing._server import tokens
from keepgoing._server.auth import Admin
from keepgoing._server.context import context
from keepgoing._server.routes._common import PREFIX, STRICT, documented
from keepgoing._server.schemas import (
    ID_PATTERN,
    AuditList,
    AuditView,
    TokenBody,
    TokenCreated,
    TokenList,
    TokenView,
)

__all__ = ["router"]

router = APIRouter(prefix=PREFIX, tags=["admin"], dependencies=STRICT)


@router.post(
    "/tokens",
    status_code=201,
    response_model=TokenCreated,
    responses=documented(reads=False),
    summary="Create a token",
)
async def create_token(body: TokenBody, request: Request, principal: Admin) -> TokenCreated:
    """Create a token; its secret is in this response only (the store keeps a hash)."""
    ctx = context(request)
    record, secret = await tokens.create_token(
        ctx.store,
        name=body.name,
        kind=body.kind,
        permissions=body.permissions,
        actor_kind=principal.kind,
        actor_id=principal.id,
        now=ctx.clock.now(),
    )
    return TokenCreated(token=secret, info=TokenView.of(record))


@router.get("/tokens", response_model=TokenList, responses=documented(), summary="List tokens")
async def list_tokens(request: Request, _: Admin, include_revoked: bool = False) -> TokenList:
    """Tokens, oldest first, without their secrets."""
    found = await context(request).store.list_tokens(include_revoked=include_revoked)
    return TokenList(tokens=[TokenView.of(t) for t in found])


@router.delete(
    "/tokens/{token_id}",
    response_model=TokenView,
    responses=documented(404),
    summary="Revoke a token",
)
async def revoke_token(
    token_id: Annotated[str, Path(pattern=r"^[0-9a-f]{16}$")],
    request: Request,
    principal: Admin,
) -> TokenView:
    """Revoke a token: from now on it gets 401. Revoking twice changes nothing."""
    ctx = context(request)
    record = await tokens.revoke_token(
        ctx.store,
        token_id,
        actor_kind=principal.kind,
        actor_id=principal.id,
        now=ctx.clock.now(),
    )
    return TokenView.of(record)


@router.get("/audit", response_model=AuditList, responses=documented(), summary="The audit log")
async def audit(
    request: Request,
    _: Admin,
    action: Annotated[str | None, Query(min_length=1, max_length=100)] = None,
    workflow_id: Annotated[str | None, Query(pattern=ID_PATTERN)] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Annotated[int, Query(ge=0, le=1_000_000_000)] = 0,
) -> AuditList:
    """Message sends, event publishes, cancels, triggers and token changes, newest
    first, each with its actor."""
    entries = await context(request).store.list_audit(
        limit=limit + 1, offset=offset, action=action, workflow_id=workflow_id
    )
    return AuditList(
        entries=[AuditView.of(e) for e in entries[:limit]],
        next_offset=offset + limit if len(entries) > limit else None,
    )
