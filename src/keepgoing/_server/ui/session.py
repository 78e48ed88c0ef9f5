"""The browser session: a token pasted once starts a server-side session, kept in a cookie.

Signing in checks the token and stores a session (``ui_sessions``): a random id
and secret, of which the store keeps only the secret's SHA-256, acting as that
token. The cookie holds ``kgs_<id>_<secret>``, never the token: ``HttpOnly;
SameSite=Strict; Path=/``, and over https ``Secure`` under the ``__Host-``
prefix (:data:`SECURE_COOKIE`), so page scripts never see it, no other site's
page sends it and no sibling domain can set it. A session ends when it has been
idle for ``ServerContext.session_idle`` seconds, when it is
``ServerContext.session_lifetime`` seconds old whatever its use, at sign-out,
and when its token is revoked. :class:`Session` sits outside the API's door
and, for a request that carries a living session's cookie and no
``Authorization`` header, hands the door the session token's principal: every
route checks its permission exactly as for any API client, and the audit log
names the token's principal.

A request the cookie authenticates that changes state (``POST``, ``PUT``,
``PATCH``, ``DELETE``) must also carry the CSRF token (:func:`csrf_token`) in
the ``X-CSRF-Token`` header or, for a plain HTML form, the ``csrf_token`` field,
and must not come from another origin (``Origin``, ``Sec-Fetch-Site``); else it
is refused with 403 before the door sees it. The CSRF token is an HMAC of a
fixed label keyed by the session's cookie value, so every server process of a
deployment agrees on it, and it dies with its session.

A page (``GET`` of a path outside the API) that the door refuses with 401 is
answered with a redirect to the sign-in page instead.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import urllib.parse
from collections.abc import AsyncGenerator, Mapping
from http.cookies import SimpleCookie

from starlette.datastructures import Headers
from starlette.formparsers import FormParser, MultiPartException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from keepgoing._server.auth import Principal, principal_of
from keepgoing._server.context import ServerContext
from keepgoing._server.door import SESSION_PRINCIPAL, UNSAFE
from keepgoing._server.errors import error_response
from keepgoing._server.tokens import hash_secret
from keepgoing._store.auth_protocol import SessionRecord
from keepgoing._store.protocol import Store

__all__ = [
    "COOKIE",
    "CSRF_FIELD",
    "CSRF_HEADER",
    "SECURE_COOKIE",
    "Session",
    "clear_cookie",
    "csrf_token",
    "end_session",
    "is_page",
    "resolve_session",
    "session_cookie",
    "form_fields",
    "session_token",
    "start_session",
]

COOKIE = "kg_session"
#: The cookie's name over https: the ``__Host-`` prefix makes a browser refuse it unless
#: it is ``Secure``, for ``Path=/`` and set by this very host (no ``Domain``).
SECURE_COOKIE = "__Host-kg_session"
_VALUE = re.compile(r"^kgs_([0-9a-f]{16})_([A-Za-z0-9_-]{43})$")
#: A session's last use is written at most this often (seconds): idle time is exact to it.
_TOUCH_EVERY = 60.0
CSRF_HEADER = "x-csrf-token"
CSRF_FIELD = "csrf_token"
_LABEL = b"keepgoing-ui-csrf-v1"
#: The largest form body read here to find its CSRF field.
_MAX_FORM = 64 * 1024
#: Paths that are never pages: the API, its documents, probes and metrics.
#: The UI's page paths (``pages.router``; a test checks the two agree). Only these are
#: pages: the API, the model gateway's ``/v1``, documents, probes and assets answer as
#: themselves, a 401 in JSON and never a sign-in page.
PAGES = frozenset(
    {"/", "/demo", "/run", "/replay", "/diff", "/memory", "/memory/volume", "/workers", "/audit"}
    | {"/reviews"}
    | {"/usage"}
    | {"/schedules"}
    | {"/signin", "/signout"}
)


def csrf_token(token: str) -> str:
    """The CSRF token of a session whose API token is ``token``."""
    return hmac.new(token.encode("utf-8"), _LABEL, hashlib.sha256).hexdigest()


def is_page(path: str) -> bool:
    """Whether ``path`` is a UI page (not the API, the gateway, documents, probes or assets)."""
    return path in PAGES


def session_token(headers: Mapping[str, str], secure: bool | None = None) -> str | None:
    """The session cookie's value in a request's headers (lower-case names), or None:
    over https (``secure``) only the ``__Host-`` cookie counts, over http only the plain
    one; None takes either."""
    raw = headers.get("cookie")
    if not raw:
        return None
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(raw)
    except Exception:  # a malformed Cookie header is no session, not an error page
        return None
    names = {True: (SECURE_COOKIE,), False: (COOKIE,), None: (SECURE_COOKIE, COOKIE)}[secure]
    for name in names:
        morsel = jar.get(name)
        if morsel is not None and morsel.value:
            return str(morsel.value)
    return None


def session_cookie(value: str, secure: bool) -> str:
    """The ``Set-Cookie`` value that starts a session (its lifetime is the server's to
    enforce: the cookie itself lasts as long as the browser keeps it)."""
    if secure:
        return f"{SECURE_COOKIE}={value}; Path=/; Secure; HttpOnly; SameSite=Strict"
    return f"{COOKIE}={value}; Path=/; HttpOnly; SameSite=Strict"


def clear_cookie(secure: bool) -> str:
    """The ``Set-Cookie`` value that ends a session."""
    if secure:
        return f"{SECURE_COOKIE}=; Path=/; Max-Age=0; Secure; HttpOnly; SameSite=Strict"
    return f"{COOKIE}=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict"


async def start_session(store: Store, token_id: str, now: float, lifetime: float) -> str:
    """Store a new session acting as ``token_id``; the cookie value that carries it."""
    session_id, secret = secrets.token_hex(8), secrets.token_urlsafe(32)
    record = SessionRecord(
        session_id=session_id,
        secret_hash=hash_secret(secret),
        token_id=token_id,
        created_at=now,
        seen_at=now,
        expires_at=now + lifetime,
    )
    await store.create_session(record, forget_before=now - lifetime)
    return f"kgs_{session_id}_{secret}"


async def resolve_session(ctx: ServerContext, value: str, now: float) -> Principal | None:
    """The principal of a living session, or None: an unknown, forged, ended, idle or
    expired session, or one whose token was revoked."""
    match = _VALUE.match(value)
    if match is None:
        return None
    session_id, secret = match.groups()
    record = await ctx.store.get_session(session_id)
    if record is None or not hmac.compare_digest(hash_secret(secret), record.secret_hash):
        return None
    if record.ended_at is not None or now >= record.expires_at:
        return None
    if now - record.seen_at >= ctx.session_idle:
        return None
    token = await ctx.store.get_token(record.token_id)
    if token is None or not token.active:
        return None
    if now - record.seen_at >= _TOUCH_EVERY:
        await ctx.store.touch_session(session_id, now)
    return principal_of(token)


async def end_session(store: Store, value: str | None, now: float) -> None:
    """End the session a cookie value names (sign-out); nothing for one that is not."""
    match = _VALUE.match(value or "")
    if match is not None:
        await store.end_session(match.group(1), now)


def same_origin(headers: Mapping[str, str], scheme: str) -> bool:
    """Whether a browser request comes from this server's own origin (or says nothing)."""
    host = headers.get("host", "").strip().lower()
    origin = headers.get("origin")
    if origin is not None:
        parsed = urllib.parse.urlsplit(origin.strip())
        if parsed.scheme != scheme or parsed.netloc.lower() != host:
            return False
    return headers.get("sec-fetch-site", "").lower() not in ("cross-site", "same-site")


class Session:
    """Plain ASGI, outside the door: cookie to bearer, CSRF, and sign-in redirects."""

    def __init__(self, app: ASGIApp, ctx: ServerContext) -> None:
        self.app = app
        self.ctx = ctx

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        secure = scope.get("scheme") == "https"
        value = session_token(headers, secure) if self.ctx.auth else None
        if value is not None and "authorization" not in headers:
            principal = await resolve_session(self.ctx, value, self.ctx.clock.now())
            if principal is not None:
                if scope.get("method") in UNSAFE:
                    refusal, receive = await self._check_csrf(scope, receive, headers, value)
                    if refusal is not None:
                        await refusal(scope, receive, send)
                        return
                scope.setdefault("state", {})[SESSION_PRINCIPAL] = principal
        path = str(scope.get("path", ""))
        if self.ctx.auth and scope.get("method") == "GET" and is_page(path):
            send = _redirect_unauthenticated(scope, send)
        await self.app(scope, receive, send)

    async def _check_csrf(
        self, scope: Scope, receive: Receive, headers: Headers, token: str
    ) -> tuple[ASGIApp | None, Receive]:
        """A refusal (or None) for a cookie-authenticated change, and the ``receive``
        to go on with (the form body, if it was read here, is replayed)."""
        if not same_origin(headers, str(scope.get("scheme", "http"))):
            return (
                error_response(
                    403,
                    "origin_not_allowed",
                    "this change comes from another site's page; the signed-in session "
                    "only accepts changes made from this server's own pages",
                ),
                receive,
            )
        expected = csrf_token(token)
        given = headers.get(CSRF_HEADER)
        content_type = headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if given is None and content_type == "application/x-www-form-urlencoded":
            body, receive = await _read_body(receive, _MAX_FORM)
            given = (await form_fields(body)).get(CSRF_FIELD)
        if given is None or not hmac.compare_digest(given.encode(), expected.encode()):
            return (
                error_response(
                    403,
                    "csrf_failed",
                    "this change carries no valid CSRF token; the session's pages send it "
                    f"in the {CSRF_HEADER!r} header or the {CSRF_FIELD!r} form field",
                ),
                receive,
            )
        return None, receive


async def form_fields(body: bytes) -> dict[str, str]:
    """Each field's first value in a URL-encoded form body (Starlette's form parser);
    nothing for a body the parser refuses, such as one with too many fields."""

    async def chunks() -> AsyncGenerator[bytes, None]:
        yield body

    try:
        form = await FormParser(Headers(), chunks(), max_fields=len(body) + 1).parse()
    except MultiPartException:
        return {}
    fields: dict[str, str] = {}
    for name, value in form.multi_items():
        if isinstance(value, str):
            fields.setdefault(name, value)
    return fields


async def _read_body(receive: Receive, limit: int) -> tuple[bytes, Receive]:
    """Read up to ``limit`` bytes of the body; return them and a ``receive`` that
    replays every message read (the rest is left for the app to read)."""
    messages: list[Message] = []
    body = b""
    while len(body) <= limit:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request":
            break
        body += message.get("body", b"")
        if not message.get("more_body", False):
            break

    async def replay() -> Message:
        if messages:
            return messages.pop(0)
        return await receive()

    return body[:limit], replay


def _redirect_unauthenticated(scope: Scope, send: Send) -> Send:
    """A ``send`` that turns the door's 401 for a page into a redirect to sign in."""
    target = str(scope.get("path", "/"))
    query = scope.get("query_string", b"").decode("latin-1")
    if query:
        target += "?" + query
    location = "/signin?" + urllib.parse.urlencode({"next": target})
    secure = scope.get("scheme") == "https"
    swallowing = False

    async def sending(message: Message) -> None:
        nonlocal swallowing
        if message["type"] == "http.response.start" and message["status"] == 401:
            swallowing = True
            await send(
                {
                    "type": "http.response.start",
                    "status": 303,
                    "headers": [
                        (b"location", location.encode("latin-1")),
                        (b"set-cookie", clear_cookie(secure).encode("latin-1")),
                        (b"content-length", b"0"),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": b""})
            return
        if swallowing:
            return
        await send(message)

    return sending
