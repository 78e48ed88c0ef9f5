"""Running the server: bind checks, the store, uvicorn, graceful shutdown.

The server binds to loopback by default. With authentication disabled it
refuses any other address: an open API on a network would let anyone start,
message and cancel runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import uvicorn
from starlette.responses import JSONResponse, Response

from keepgoing._gateway.config import GatewayConfig, load_config
from keepgoing._open_store import store_from_url
from keepgoing._procinfo import refuse_inspection
from keepgoing._server.app import create_app
from keepgoing._server.defaults import (
    DEFAULT_HOST,
    DEFAULT_LONG_POLL_MAX,
    DEFAULT_MAX_BODY,
    DEFAULT_PORT,
    DEFAULT_SESSION_IDLE,
    DEFAULT_SESSION_LIFETIME,
    DEFAULT_STREAM_MAX,
)
from keepgoing._server.door import is_loopback
from keepgoing._server.errors import error_response
from keepgoing._server.logging import configure_logging
from keepgoing._server.middleware import NoSniff
from keepgoing._store.protocol import Store
from keepgoing._store.startup import Opening
from keepgoing._store.url import redact_url, resolve_store_url
from keepgoing._version import __version__
from keepgoing._worker.retention import RetentionPolicy, load_retention
from keepgoing.errors import ConfigurationError, StoreError

__all__ = ["ServeOptions", "bind", "check_bind", "is_loopback", "run_server"]

log = logging.getLogger("keepgoing.server")


@dataclass(frozen=True)
class ServeOptions:
    store: str | None = None
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    auth: bool = True
    log_json: bool = False
    verbose: bool = False
    max_body: int = DEFAULT_MAX_BODY
    long_poll_max: float = DEFAULT_LONG_POLL_MAX
    stream_max: float = DEFAULT_STREAM_MAX
    connect_timeout: float | None = None  # None: wait for the store for as long as it takes
    gateway_config: str | None = None  # keepgoing.toml with the [gateway] table
    session_idle: float = DEFAULT_SESSION_IDLE
    session_lifetime: float = DEFAULT_SESSION_LIFETIME


def check_bind(host: str, port: int, auth: bool) -> None:
    """Refuse an address the server must not listen on.

    Raises:
        ConfigurationError: a bad port, or a non-loopback host without authentication.
    """
    if not 0 <= port <= 65535:
        raise ConfigurationError(f"--port must be 0..65535, not {port}")
    if not auth and not is_loopback(host):
        raise ConfigurationError(
            f"refusing to serve on {host} with authentication disabled: anyone who can reach "
            "it could start, message and cancel runs. Bind to 127.0.0.1, or drop --no-auth "
            "and create tokens with `keepgoing token create`"
        )


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port`` (port 0 picks a free one).

    Raises:
        ConfigurationError: the address cannot be bound (in use, unknown host).
    """
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        family, kind, proto, _, address = infos[0]
        sock = socket.socket(family, kind, proto)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(address)
        except OSError:
            sock.close()
            raise
    except OSError as exc:
        raise ConfigurationError(f"cannot listen on {host}:{port}: {exc}") from None
    sock.listen(2048)
    sock.setblocking(False)
    return sock


def run_server(options: ServeOptions, *, stop: threading.Event | None = None) -> None:
    """Serve until SIGINT or SIGTERM (or until ``stop`` is set, from another thread).

    A store that cannot be reached yet is waited for (see :class:`Opening`) while the
    server listens: ``/healthz`` answers 200, ``/readyz`` and every other call 503.

    Raises:
        ConfigurationError: a refused bind address or a bad store URL.
        StoreError: the store refused in a way waiting cannot fix (a wrong password, a
            missing database), or stayed away past ``connect_timeout``.
    """
    configure_logging(json_lines=options.log_json, verbose=options.verbose)
    # Replicas of deployed groups run as this user: they must not read this process's
    # environment (provider keys, the secret key, the store URL) through /proc.
    refuse_inspection()
    check_bind(options.host, options.port, options.auth)
    gateway = load_config(options.gateway_config)
    retention = load_retention(options.gateway_config)
    store = store_from_url(options.store)
    opening = Opening(store, timeout=options.connect_timeout)
    sock = bind(options.host, options.port)
    try:
        asyncio.run(_serve(opening, sock, options, stop, gateway, retention))
    finally:
        sock.close()


async def _serve(
    opening: Opening,
    sock: socket.socket,
    options: ServeOptions,
    stop: threading.Event | None,
    gateway: GatewayConfig,
    retention: RetentionPolicy | None = None,
) -> None:
    store = opening.store
    try:
        # One attempt before serving: a store that refuses for good fails here, before
        # the server says it is up; one that is merely unreachable is waited for below.
        await opening.try_once()
        gate = _Gate(opening)
        config = uvicorn.Config(
            NoSniff(gate),  # the gate's own answers too, before the app is up
            log_config=None,
            access_log=False,
            lifespan="off",  # the app's lifespan is entered below, once the store is open
            timeout_graceful_shutdown=5,
            server_header=False,
        )
        server = _Server(config)
        stopping = asyncio.Event()

        def request_stop() -> None:
            stopping.set()
            server.stop()

        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, request_stop)
        _log_listening(sock, options, opening)
        watch = asyncio.create_task(_watch(stop, request_stop)) if stop is not None else None
        serving = asyncio.create_task(server.serve(sockets=[sock]))
        serving.add_done_callback(lambda _: stopping.set())  # uvicorn ended: stop waiting
        try:
            if await opening.wait(stopping):
                app = create_app(
                    store,
                    auth=options.auth,
                    max_body=options.max_body,
                    long_poll_max=options.long_poll_max,
                    stream_max=options.stream_max,
                    gateway=gateway,
                    session_idle=options.session_idle,
                    session_lifetime=options.session_lifetime,
                    replica_url=replica_url(sock),
                    retention=retention,
                )
                async with app.router.lifespan_context(app):
                    await _warn_about(store, options)
                    _say_retention(retention or RetentionPolicy())
                    gate.app = app
                    await serving
                log.info("keepgoing server stopped", extra={"fields": {"event": "stopped"}})
        finally:
            if watch is not None:
                watch.cancel()
            server.should_exit = True  # the store stayed away, or a stop while waiting
            await serving
    finally:
        with contextlib.suppress(Exception):
            await store.close()


def replica_url(sock: socket.socket) -> str:
    """This server's URL as a replica on this machine reaches it (a wildcard address
    is reached on loopback)."""
    host, port = sock.getsockname()[:2]
    if host in ("0.0.0.0", ""):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def _log_listening(sock: socket.socket, options: ServeOptions, opening: Opening) -> None:
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    log.info(
        "keepgoing server listening on http://%s:%d (store %s, authentication %s)%s",
        shown,
        port,
        opening.where,
        "on" if options.auth else "OFF",
        "; not ready until the store is reachable" if opening.waiting else "",
        extra={"fields": {"event": "listening", "host": host, "port": port}},
    )


class _Gate:
    """The ASGI app uvicorn serves: the API once the store is open, and until then
    answers of its own: ``/healthz`` 200 (the process is alive), ``/readyz`` and
    everything else 503, so probes and load balancers keep traffic away."""

    def __init__(self, opening: Opening) -> None:
        self.opening = opening
        self.app: Any = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if self.app is not None:
            await self.app(scope, receive, send)
            return
        if scope["type"] != "http":
            return  # websockets are refused by uvicorn when the app does not accept
        path = scope.get("path", "")
        retry = {"Retry-After": "1"}
        response: Response
        if path == "/healthz":
            response = JSONResponse({"status": "ok", "version": __version__})
        elif path == "/readyz":
            body = {"status": "waiting", "detail": "waiting for the store to be reachable"}
            response = JSONResponse(body, status_code=503, headers=retry)
        else:
            response = error_response(
                503,
                StoreError.code,
                "the server is waiting for its store to be reachable; try again shortly",
                headers=retry,
            )
        await response(scope, receive, send)


async def _watch(stop: threading.Event, request_stop: Callable[[], None]) -> None:
    # A thread's event: polled, since waiting for it in a thread would hold up shutdown.
    while not stop.is_set():  # noqa: ASYNC110
        await asyncio.sleep(0.1)
    request_stop()


class _Server(uvicorn.Server):
    """uvicorn, but signals are ours: a stop ends :func:`run_server` normally, so the
    store is closed and ``keepgoing dev`` stops its worker (uvicorn would re-raise
    the signal after shutdown and kill the process first)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    def install_signal_handlers(self) -> None:  # uvicorn < 0.29
        return

    def stop(self) -> None:
        if self.should_exit:
            self.force_exit = True  # a second Ctrl-C: do not wait for open requests
        self.should_exit = True


def _say_retention(policy: RetentionPolicy) -> None:
    if policy.on:
        log.info(
            "retention: ended runs are deleted %s after they end%s",
            _days(policy.runs or 0.0),
            f", archived to {policy.archive} first" if policy.archive else "",
        )
    else:
        log.info(
            "retention is off: ended runs are kept forever (except workflows with their own "
            "retention=); set [retention] runs in keepgoing.toml or KEEPGOING_RETENTION"
        )


def _days(seconds: float) -> str:
    return f"{seconds / 86400:g} day(s)" if seconds >= 86400 else f"{seconds:g} s"


async def _warn_about(store: Store, options: ServeOptions) -> None:
    if store.url in ("memory://", "sqlite://", "sqlite:///:memory:"):
        log.warning("the store is in memory: workers in other processes cannot reach it")
    if options.auth and not await store.list_tokens():
        log.warning(
            "no tokens exist yet; create one with: keepgoing token create --name YOU "
            "--kind user --permissions admin --store %s",
            redact_url(resolve_store_url(options.store)),
        )
