"""The door: who may send a request at all, decided before routing and parsing.

* **With authentication** every call but the public ones (:data:`PUBLIC`) must
  carry a valid token, checked here, before the router runs and before the
  body is read: an anonymous caller gets 401 whatever it sent (a malformed
  body, an unknown query parameter, a path that does not exist) and learns
  nothing about the API, nor costs more than one token lookup.
* **Without authentication** (``--no-auth``, ``keepgoing dev``; loopback only)
  the caller is anyone who can reach the socket, including a web page the
  developer has open: a page can make its own domain resolve to 127.0.0.1
  (DNS rebinding) and call the server as "its" origin. So the server answers
  only requests whose ``Host`` names a loopback address (``127.0.0.1``,
  ``[::1]``, ``localhost`` when it resolves to loopback only) with the
  server's port, and refuses a state-changing request (``POST``, ``PUT``,
  ``PATCH``, ``DELETE``) a browser marks as coming from another origin
  (``Origin``, ``Sec-Fetch-Site``).
"""

from __future__ import annotations

import dataclasses
import functools
import ipaddress
import socket
import urllib.parse

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from keepgoing._server.auth import ANONYMOUS, Principal, Unauthenticated, authenticate
from keepgoing._server.context import ServerContext
from keepgoing._server.errors import error_response

__all__ = [
    "PUBLIC",
    "SESSION_PRINCIPAL",
    "PUBLIC_PREFIXES",
    "Door",
    "host_allowed",
    "is_loopback",
    "is_public",
    "localhost_is_loopback",
]

#: The calls that need no token (the web UI's sign-in page among them).
PUBLIC = frozenset({"/healthz", "/readyz", "/openapi.json", "/docs", "/signin"})
#: Folders whose files need no token: the web UI's stylesheet and scripts.
PUBLIC_PREFIXES = ("/ui/static/",)


def is_public(path: str) -> bool:
    """Whether ``path`` needs no token."""
    return path in PUBLIC or path.startswith(PUBLIC_PREFIXES)


UNSAFE = frozenset({"POST", "PUT", "PATCH", "DELETE"})
#: Where the UI's session middleware (outside the door) leaves the principal of a
#: living session cookie; the door takes it instead of a bearer token.
SESSION_PRINCIPAL = "keepgoing.session_principal"


@functools.cache
def localhost_is_loopback() -> bool:
    """Whether ``localhost`` resolves to loopback addresses only (checked once).

    A resolver (``/etc/hosts``, a search domain) can map ``localhost``
    elsewhere; then the name is not trusted.
    """
    try:
        infos = socket.getaddrinfo("localhost", None, type=socket.SOCK_STREAM)
    except OSError:
        return False
    addresses = {info[4][0] for info in infos}
    return bool(addresses) and all(_loopback_address(str(a)) for a in addresses)


def _loopback_address(text: str) -> bool:
    try:
        return ipaddress.ip_address(text.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address, ``[::1]``, or ``localhost``) is loopback."""
    if host.lower().rstrip(".") == "localhost":
        return localhost_is_loopback()
    return _loopback_address(host.strip("[]"))


def host_allowed(header: str, port: int | None) -> bool:
    """Whether a ``Host`` header names a loopback address, with the server's port."""
    header = header.strip()
    if header.startswith("["):
        name, bracket, rest = header[1:].partition("]")
        if not bracket or (rest and not rest.startswith(":")):
            return False
        given = rest[1:] if rest else ""
    else:
        name, _, given = header.partition(":")
    if not name or not is_loopback(name):
        return False
    return given == "" or (
        given.isascii() and given.isdigit() and port is not None and int(given) == port
    )


class Door:
    """Plain ASGI, outermost: refuses before anything reads the request."""

    def __init__(self, app: ASGIApp, ctx: ServerContext) -> None:
        self.app = app
        self.ctx = ctx

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        state = scope.setdefault("state", {})
        if not self.ctx.auth:
            refusal = _foreign(scope, headers)
            if refusal is not None:
                response = error_response(403, refusal[0], refusal[1])
                await response(scope, receive, send)
                return
            state["principal"] = await _anonymous(self.ctx, headers)
        elif (session := state.pop(SESSION_PRINCIPAL, None)) is not None:
            state["principal"] = session
        elif not is_public(path := str(scope.get("path", ""))):
            try:
                principal = await authenticate(self.ctx.store, _bearer(headers))
            except Unauthenticated as exc:
                response = error_response(
                    401, "unauthenticated", str(exc), headers={"WWW-Authenticate": "Bearer"}
                )
                await response(scope, receive, send)
                return
            if principal.scope and not (
                path == principal.scope or path.startswith(principal.scope + "/")
            ):
                response = error_response(
                    403,
                    "permission_denied",
                    f"this token may call {principal.scope} only (a group's gateway key)",
                )
                await response(scope, receive, send)
                return
            state["principal"] = principal
        await self.app(scope, receive, send)


async def _anonymous(ctx: ServerContext, headers: Headers) -> Principal:
    """Without authentication the caller is anonymous; a group's gateway key it sends
    still names the key its model calls are metered and limited as."""
    text = _bearer(headers)
    if text is None or not text.startswith("kg_"):
        return ANONYMOUS
    try:
        principal = await authenticate(ctx.store, text)
    except Unauthenticated:
        return ANONYMOUS
    if principal.gateway_key is None:
        return ANONYMOUS
    return dataclasses.replace(ANONYMOUS, gateway_key=principal.gateway_key)


def _bearer(headers: Headers) -> str | None:
    scheme, _, credentials = headers.get("authorization", "").strip().partition(" ")
    return credentials.strip() or None if scheme.lower() == "bearer" else None


def _foreign(scope: Scope, headers: Headers) -> tuple[str, str] | None:
    """Why a request to a server without authentication is refused, or None."""
    server = scope.get("server")
    port = int(server[1]) if server and server[1] is not None else None
    host = headers.get("host", "")
    if not host_allowed(host, port):
        return (
            "host_not_allowed",
            f"this server runs without authentication and answers only requests for a "
            f"loopback address (Host 127.0.0.1, [::1] or localhost, port {port}), "
            f"not Host {host!r}; a page on another site cannot call it",
        )
    if scope.get("method") not in UNSAFE:
        return None
    origin = headers.get("origin")
    site = headers.get("sec-fetch-site", "").lower()
    if origin is not None and not _same_origin(origin, host):
        return (
            "origin_not_allowed",
            f"this server runs without authentication and refuses changes requested by "
            f"another origin ({origin!r}); call it from a script or the CLI",
        )
    if site in ("cross-site", "same-site"):
        return (
            "origin_not_allowed",
            "this server runs without authentication and refuses changes a browser "
            f"marks as {site}; call it from a script or the CLI",
        )
    return None


def _same_origin(origin: str, host: str) -> bool:
    parsed = urllib.parse.urlsplit(origin.strip())
    return parsed.scheme == "http" and parsed.netloc.lower() == host.strip().lower()
