"""Tokens and the audit log (the ``admin`` permission)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Request

from keepgoing._server import tokens
from keepgoing._server.auth import Admin, Principal
from keepgoing._server.context import ServerContext, context
from keepgoing._server.errors import ApiError
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
from keepgoing._store.protocol import Store

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
    """Create a token; its secret is in this response only (the store keeps a hash).

    A server without authentication creates no tokens (403): its callers are
    not known, and a token works on every server of the store.
    """
    ctx = context(request)
    _refuse_without_auth(ctx.auth, "create")
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
    responses=documented(404, 409),
    summary="Revoke a token",
)
async def revoke_token(
    token_id: Annotated[str, Path(pattern=r"^[0-9a-f]{16}$")],
    request: Request,
    principal: Admin,
) -> TokenView:
    """Revoke a token: from now on it gets 401. Revoking twice changes nothing.

    Revoking the last active admin token is a 409: nobody could manage tokens
    through the API any more (the CLI, with store access, can make another).
    A server without authentication revokes no tokens (403).
    """
    ctx = context(request)
    _refuse_without_auth(ctx.auth, "revoke")
    async with ctx.revoking:  # one revoke at a time, so two cannot each leave the other last
        await _keep_an_admin(ctx.store, token_id)
        return await _revoke(ctx, token_id, principal)


async def _revoke(ctx: ServerContext, token_id: str, principal: Principal) -> TokenView:
    record = await tokens.revoke_token(
        ctx.store,
        token_id,
        actor_kind=principal.kind,
        actor_id=principal.id,
        now=ctx.clock.now(),
    )
    return TokenView.of(record)


def _refuse_without_auth(auth: bool, verb: str) -> None:
    if not auth:
        raise ApiError(
            403,
            "permission_denied",
            f"this server runs without authentication, so it does not {verb} tokens (a "
            "token works on every server of the store); use `keepgoing token` with "
            "--store, or a server with authentication",
        )


async def _keep_an_admin(store: Store, token_id: str) -> None:
    """Refuse to revoke the last active token with the ``admin`` permission."""
    active = await store.list_tokens(include_revoked=False)
    target = next((t for t in active if t.token_id == token_id), None)
    if target is None or "admin" not in target.permissions:
        return
    if any("admin" in t.permissions for t in active if t.token_id != token_id):
        return
    raise ApiError(
        409,
        "last_admin_token",
        f"token {token_id} is the last active admin token; revoking it would lock everyone "
        "out of token management. Create another first, with store access: keepgoing token "
        "create --name NAME --kind user --permissions admin --store DSN",
        {"token_id": token_id},
    )


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
