"""``keepgoing store``: what the store's owner sets up once (the workers' database role)."""

from __future__ import annotations

import os
from typing import Annotated

import typer

from keepgoing._store.url import resolve_store_url
from keepgoing.cli._app import app
from keepgoing.cli._common import StoreOption, cli_errors, console, fail

store_app = typer.Typer(help="Set up the store: the workers' database role.", no_args_is_help=True)
app.add_typer(store_app, name="store")


@store_app.command("worker-role")
def worker_role(
    role: Annotated[str, typer.Argument(help="The role's name, e.g. keepgoing_worker.")],
    store: StoreOption = None,
    password_env: Annotated[
        str | None,
        typer.Option(
            help="An environment variable holding the role's password (none: the role "
            "logs in as pg_hba.conf allows, e.g. by certificate).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Create a PostgreSQL role for workers and grant it only the worker tables.

    The role can run workflows, write volumes and logs, and settle its model calls;
    it cannot read or write tokens, sessions, secrets, the audit log or deploys.
    Give replicas its URL with KEEPGOING_WORKER_STORE on the server. Run it again
    after an upgrade (it only grants).

    Example:

        KG_WORKER_PASSWORD=... keepgoing store worker-role keepgoing_worker \\
            --store postgresql://owner@db/kg --password-env KG_WORKER_PASSWORD
    """
    url = resolve_store_url(store)
    if not url.startswith(("postgresql://", "postgres://")):
        fail(
            "a worker role exists only on PostgreSQL; on SQLite every process that can open "
            "the file has the store's whole power (docs/groups.md)",
            2,
        )
    password = None
    if password_env is not None:
        password = os.environ.get(password_env)
        if not password:
            fail(f"{password_env} is not set", 2)
    from keepgoing._store.postgres.roles import grant_worker_role  # noqa: PLC0415

    with cli_errors():
        grant_worker_role(url, role, password=password)
    console.print(f"role {role} can now run workers (and nothing else) on this store")
