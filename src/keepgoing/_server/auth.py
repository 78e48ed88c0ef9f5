"""Who is calling: bearer tokens, principals and permission checks.

A token is ``kg_<id>_<secret>``: the 16-hex-digit id is public and finds the
row; the secret is checked against the stored SHA-256 with
:func:`hmac.compare_digest`, so the comparison takes the same time wherever
it differs. The principal a token maps to is the only source of a message's
sender: a ``user`` token sends as ``("user", <its name>)``, a ``service``
token as ``("service_token", <its id>)`` — never its secret.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from keepgoing._server.errors import ApiError
from keepgoing._server.group_keys import SCOPE, group_key_of
from keepgoing._server.tokens import hash_secret
from keepgoing._store.auth_protocol import TokenRecord
from keepgoing._store.protocol import Store

__all__ = [
    "ANONYMOUS",
    "Admin",
    "CancelsRuns",
    "PublishesEvents",
    "ReadsRuns",
    "ReadsVolumes",
    "SendsMessages",
    "Triggers",
    "Principal",
    "WritesVolumes",
    "authenticate",
    "principal_of",
    "require",
]

_TOKEN = re.compile(r"^kg_([0-9a-f]{16})_([A-Za-z0-9_-]{20,200})$")
_DUMMY_HASH = hashlib.sha256(b"no such token").hexdigest()

bearer = HTTPBearer(auto_error=False, description="An API token: `Authorization: Bearer kg_...`")


@dataclass(frozen=True)
class Principal:
    """The caller. ``kind``/``id`` become the sender and the audit log's actor."""

    kind: str  # "user" | "service_token"
    id: str
    token_id: str | None
    permissions: frozenset[str]
    #: The only path prefix the token may call (``/v1`` for a group's minted key).
    scope: str | None = None
    #: The gateway key its model calls are metered and limited as: ``group:<name>`` for
    #: a group's minted key (its limits hold across the group's revisions), else None
    #: (its own token id).
    gateway_key: str | None = None

    def allows(self, permission: str) -> bool:
        return permission in self.permissions or "admin" in self.permissions


#: The caller when authentication is disabled (loopback only): allowed everything.
ANONYMOUS = Principal("user", "anonymous", None, frozenset({"admin"}))


def principal_of(token: TokenRecord) -> Principal:
    group = group_key_of(token)
    if group is not None:
        perms = frozenset(token.permissions)
        return Principal("service_token", token.token_id, token.token_id, perms, SCOPE, group)
    if token.kind == "user":
        return Principal("user", token.name, token.token_id, frozenset(token.permissions))
    return Principal("service_token", token.token_id, token.token_id, frozenset(token.permissions))


class Unauthenticated(Exception):
    """No token, a malformed one, an unknown one, or a revoked one (the message says which)."""


async def authenticate(store: Store, text: str | None) -> Principal:
    """The principal of token ``text``.

    Raises:
        Unauthenticated: the token is missing, malformed, unknown or revoked.
    """
    if not text:
        raise Unauthenticated("this call needs a token: send `Authorization: Bearer <token>`")
    match = _TOKEN.match(text)
    if match is None:
        raise Unauthenticated("the token is not a keepgoing token (kg_<id>_<secret>)")
    token_id, secret = match.groups()
    record = await store.get_token(token_id)
    expected = record.secret_hash if record is not None else _DUMMY_HASH
    if not hmac.compare_digest(hash_secret(secret), expected) or record is None:
        raise Unauthenticated("the token is not valid")
    if not record.active:
        raise Unauthenticated(f"token {token_id} has been revoked")
    return principal_of(record)


def require(permission: str) -> Any:
    """A route dependency: insist that the caller the door let in has ``permission``.

    The door leaves the principal on ``request.state.principal`` (the access log
    reads it there too).
    """

    async def dependency(
        request: Request,
        _: HTTPAuthorizationCredentials | None = Security(bearer),  # noqa: B008 (documents it)
    ) -> Principal:
        # The door (keepgoing._server.door) authenticated the caller before routing.
        principal: Principal | None = getattr(request.state, "principal", None)
        if principal is None:
            raise ApiError(401, "unauthenticated", "this call needs a token")
        if not principal.allows(permission):
            raise ApiError(
                403,
                "permission_denied",
                f"this token lacks the {permission!r} permission",
                {"permission": permission},
            )
        return principal

    return Depends(dependency)


# The caller of a route, with the permission it needs: ``principal: ReadsRuns``.
ReadsRuns = Annotated[Principal, require("runs.read")]
Triggers = Annotated[Principal, require("workflows.trigger")]
SendsMessages = Annotated[Principal, require("messages.send")]
PublishesEvents = Annotated[Principal, require("events.publish")]
CancelsRuns = Annotated[Principal, require("runs.cancel")]
ResumesRuns = Annotated[Principal, require("runs.resume")]
ForksRuns = Annotated[Principal, require("runs.fork")]
ReadsVolumes = Annotated[Principal, require("volumes.read")]
WritesVolumes = Annotated[Principal, require("volumes.write")]
ReadsGroups = Annotated[Principal, require("groups.read")]
WritesGroups = Annotated[Principal, require("groups.write")]
KillsInstances = Annotated[Principal, require("groups.kill")]
ReadsGatewayUsage = Annotated[Principal, require("gateway.read")]
ReadsSchedules = Annotated[Principal, require("schedules.read")]
WritesSchedules = Annotated[Principal, require("schedules.write")]
Admin = Annotated[Principal, require("admin")]
