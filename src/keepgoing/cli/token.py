"""``keepgoing token create | list | revoke``: API tokens.

With ``--url`` the commands call the server (they need an ``admin`` token);
otherwise they use the store directly, which is how the first token is made.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from rich.table import Table

from keepgoing._client.store_backend import current_user
from keepgoing._clock import system_clock
from keepgoing._open_store import store_from_url
from keepgoing._server import tokens
from keepgoing._store.auth_protocol import PERMISSIONS, TokenRecord
from keepgoing._store.protocol import Store
from keepgoing.cli._app import app
from keepgoing.cli._common import (
    JsonOption,
    StoreOption,
    TokenOption,
    UrlOption,
    add_row,
    announce_store,
    cli_errors,
    console,
    emit_json,
)

if TYPE_CHECKING:
    from keepgoing._client.http_backend import HttpBackend

T = TypeVar("T")

token_app = typer.Typer(help="Create, list and revoke API tokens.", no_args_is_help=True)
app.add_typer(token_app, name="token")


def with_store(url: str | None, work: Callable[[Store], Awaitable[T]]) -> T:
    """Run ``work`` on the opened store at ``url`` (default: the local store)."""

    resolved = announce_store(url)

    async def main() -> T:
        store = store_from_url(resolved)
        await store.open()
        try:
            return await work(store)
        finally:
            await store.close()

    return asyncio.run(main())


def _remote(url: str | None, token: str | None, store: str | None) -> HttpBackend | None:
    if not url or store is not None:
        return None
    from keepgoing._client.http_backend import HttpBackend  # noqa: PLC0415 (httpx is slow to import)

    return HttpBackend(url, token)


def _view(t: TokenRecord) -> dict[str, Any]:
    """A token as the API shows it (no hash)."""
    return {
        "token_id": t.token_id,
        "name": t.name,
        "kind": t.kind,
        "permissions": list(t.permissions),
        "created_at": t.created_at,
        "created_by": t.created_by,
        "revoked_at": t.revoked_at,
    }


@token_app.command("create")
def create(
    name: Annotated[str, typer.Option(help="User tokens: the user's id. Service: a label.")],
    kind: Annotated[str, typer.Option(help="user or service.")] = "user",
    permissions: Annotated[
        list[str] | None,
        typer.Option(
            "--permissions",
            "-p",
            help=f"Repeat or comma-separate: {', '.join(PERMISSIONS)}.",
        ),
    ] = None,
    url: UrlOption = None,
    token: TokenOption = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Create a token and print its secret, once: only its hash is stored.

    A user token sends messages as sender_kind "user" with NAME as the sender
    id; a service token as "service_token" with the token's id.

    Example:

        keepgoing token create --name ci-bot --kind service -p workflows.trigger,runs.read
    """
    granted = [p.strip() for item in permissions or [] for p in item.split(",") if p.strip()]
    with cli_errors():
        remote = _remote(url, token, store)
        if remote is not None:
            with_remote = remote.create_token(name, kind, granted)
            secret, info = with_remote["token"], with_remote["info"]
        else:
            record, secret = with_store(
                store,
                lambda s: tokens.create_token(
                    s,
                    name=name,
                    kind=kind,
                    permissions=granted,
                    actor_kind="user",
                    actor_id=current_user(),
                    now=system_clock.now(),
                ),
            )
            info = _view(record)
    if as_json:
        emit_json({"token": secret, "info": info})
        return
    console.print(secret, style="bold green", markup=False)
    console.print(
        f"token {info['token_id']} ({info['kind']} {info['name']!r}): "
        f"{', '.join(info['permissions'])}"
    )
    console.print("Store the secret now: it is not shown again.", style="yellow")


@token_app.command("list")
def list_tokens(
    include_revoked: Annotated[bool, typer.Option("--all", help="Include revoked tokens.")] = False,
    url: UrlOption = None,
    token: TokenOption = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """List tokens (never their secrets).

    Example:

        keepgoing token list --all
    """
    with cli_errors():
        remote = _remote(url, token, store)
        if remote is not None:
            rows: list[dict[str, Any]] = remote.list_tokens(include_revoked=include_revoked)
        else:
            found = with_store(store, lambda s: s.list_tokens(include_revoked=include_revoked))
            rows = [_view(t) for t in found]
    if as_json:
        emit_json(rows)
        return
    table = Table(title=f"{len(rows)} token(s)")
    for column in ("id", "name", "kind", "permissions", "created by", "revoked"):
        table.add_column(column, overflow="fold")
    for row in rows:
        add_row(
            table,
            row["token_id"],
            row["name"],
            row["kind"],
            ", ".join(row["permissions"]),
            row["created_by"],
            "yes" if row["revoked_at"] else "",
        )
    console.print(table)


@token_app.command("revoke")
def revoke(
    token_id: Annotated[str, typer.Argument(help="The token's id (from `token list`).")],
    url: UrlOption = None,
    token: TokenOption = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Revoke a token: from now on the server answers it with 401.

    Example:

        keepgoing token revoke 3f9c2a1b7d4e5f60
    """
    with cli_errors():
        remote = _remote(url, token, store)
        if remote is not None:
            info = remote.revoke_token(token_id)
        else:
            record = with_store(
                store,
                lambda s: tokens.revoke_token(
                    s,
                    token_id,
                    actor_kind="user",
                    actor_id=current_user(),
                    now=system_clock.now(),
                ),
            )
            info = _view(record)
    if as_json:
        emit_json(info)
        return
    console.print(
        f"revoked token {info['token_id']} ({info['kind']} {info['name']!r})", markup=False
    )
