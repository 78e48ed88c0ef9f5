"""Running the server: bind checks, the store, uvicorn, graceful shutdown.

The server binds to loopback by default. With authentication disabled it
refuses any other address: an open API on a network would let anyone start,
message and cancel runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import signal
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass

import uvicorn

from keepgoing._server.app import create_app
from keepgoing._server.defaults import DEFAULT_HOST, DEFAULT_MAX_BODY, DEFAULT_PORT
from keepgoing._server.logging import configure_logging
from keepgoing._store.protocol import Store
from keepgoing._store.url import resolve_store_url, store_from_url
from keepgoing.errors import ConfigurationError

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


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


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

    Raises:
        ConfigurationError: a refused bind address or a bad store URL.
        StoreError: the store cannot be opened.
    """
    configure_logging(json_lines=options.log_json, verbose=options.verbose)
    check_bind(options.host, options.port, options.auth)
    store = store_from_url(options.store)
    sock = bind(options.host, options.port)
    try:
        asyncio.run(_serve(store, sock, options, stop))
    finally:
        sock.close()


async def _serve(
    store: Store, sock: socket.socket, options: ServeOptions, stop: threading.Event | None
) -> None:
    await store.open()  # a broken store fails here, before the server says it is up
    try:
        await _warn_about(store, options)
        app = create_app(store, auth=options.auth, max_body=options.max_body)
        config = uvicorn.Config(
            app,
            log_config=None,
            access_log=False,
            lifespan="on",
            timeout_graceful_shutdown=5,
            server_header=False,
        )
        server = _Server(config)
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, server.stop)
        host, port = sock.getsockname()[:2]
        shown = f"[{host}]" if ":" in host else host
        log.info(
            "keepgoing server listening on http://%s:%d (store %s, authentication %s)",
            shown,
            port,
            resolve_store_url(options.store),
            "on" if options.auth else "OFF",
            extra={"fields": {"event": "listening", "host": host, "port": port}},
        )
        watch = asyncio.create_task(_watch(stop, server)) if stop is not None else None
        try:
            await server.serve(sockets=[sock])
        finally:
            if watch is not None:
                watch.cancel()
    finally:
        with contextlib.suppress(Exception):
            await store.close()


async def _watch(stop: threading.Event, server: _Server) -> None:
    # A thread's event: polled, since waiting for it in a thread would hold up shutdown.
    while not stop.is_set():  # noqa: ASYNC110
        await asyncio.sleep(0.1)
    server.should_exit = True


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


async def _warn_about(store: Store, options: ServeOptions) -> None:
    if store.url in ("memory://", "sqlite://", "sqlite:///:memory:"):
        log.warning("the store is in memory: workers in other processes cannot reach it")
    if options.auth and not await store.list_tokens():
        log.warning(
            "no tokens exist yet; create one with: keepgoing token create --name YOU "
            "--kind user --permissions admin --store %s",
            resolve_store_url(options.store),
        )
