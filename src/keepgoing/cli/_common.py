"""What the commands share: connection options, the client, JSON output, errors.

A command talks to a server when ``--url`` (or ``KEEPGOING_URL``) is set and
``--store`` is not; otherwise it opens the store directly, and says which one on
stderr (``store sqlite:////…/.keepgoing/keepgoing.db``): with neither option nor
``KEEPGOING_STORE`` that is the project's, found as git finds ``.git``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import sys
from collections.abc import Iterator
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console, RenderableType
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from keepgoing._client.client import Client
from keepgoing._store.url import redact_url, resolve_store_url
from keepgoing.errors import ConfigurationError, KeepgoingError

__all__ = [
    "JsonOption",
    "StoreOption",
    "TokenOption",
    "UrlOption",
    "add_row",
    "announce_store",
    "cli_errors",
    "console",
    "emit_json",
    "fail",
    "open_client",
    "parse_json",
    "plain",
]

UrlOption = Annotated[
    str | None,
    typer.Option(
        "--url",
        envvar="KEEPGOING_URL",
        help="Server URL, e.g. http://127.0.0.1:8711. Without it the store is used directly.",
        show_default=False,
    ),
]
TokenOption = Annotated[
    str | None,
    typer.Option(
        "--token",
        envvar="KEEPGOING_TOKEN",
        help="API token for --url.",
        show_default=False,
    ),
]
StoreOption = Annotated[
    str | None,
    typer.Option(
        "--store",
        help=(
            "Store URL (default: KEEPGOING_STORE, else .keepgoing/keepgoing.db in this "
            "folder or the nearest parent that has a .keepgoing folder)."
        ),
        show_default=False,
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON, for scripts.")]

console = Console(highlight=False, soft_wrap=True)
errors_console = Console(stderr=True, highlight=False)


def announce_store(store: str | None) -> str:
    """The URL of the store a command opens (``--store``, ``KEEPGOING_STORE`` or the
    project's), printed on stderr so that ``--json`` output stays clean."""
    url = resolve_store_url(store)
    print(f"store {redact_url(url)}", file=sys.stderr, flush=True)
    return url


def open_client(url: str | None, token: str | None, store: str | None) -> Client:
    """A client on the server (``url``) or, with ``store`` or no URL, on the store
    (whose URL is printed on stderr)."""
    if store is not None or not url:
        # Client() alone would read KEEPGOING_URL again; here no URL means the store.
        return Client(store=announce_store(store))
    return Client(url, token=token)


def add_row(table: Table, *cells: RenderableType) -> None:
    """Add a row whose text is shown as it is: user data is never read as rich markup."""
    table.add_row(*(Text(c) if isinstance(c, str) else c for c in cells))


def fail(message: str, code: int = 1) -> NoReturn:
    errors_console.print(f"[red]error:[/] {escape(message)}", soft_wrap=True)
    raise typer.Exit(code)


@contextlib.contextmanager
def cli_errors() -> Iterator[None]:
    """Turn keepgoing's errors (and bad values) into ``error: ...`` and an exit code:
    2 for configuration and usage problems, 1 for everything else."""
    try:
        yield
    except ConfigurationError as exc:
        fail(str(exc), 2)
    except (KeepgoingError, ValueError, TypeError, TimeoutError, LookupError) as exc:
        name = getattr(exc, "code", type(exc).__name__)
        fail(f"{exc} [{name}]")


def plain(value: Any) -> Any:
    """``value`` as JSON-ready data (dataclasses, tuples and NamedTuples included)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {k: plain(v) for k, v in dataclasses.asdict(value).items()}
    if hasattr(value, "_asdict"):
        return {k: plain(v) for k, v in value._asdict().items()}
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [plain(v) for v in value]
    return value


def emit_json(value: Any) -> None:
    sys.stdout.write(json.dumps(plain(value), indent=2, ensure_ascii=False, default=str) + "\n")


def parse_json(text: str | None, what: str) -> Any:
    """``text`` as JSON (``@file.json`` reads a file); None stays None."""
    if text is None:
        return None
    if text.startswith("@"):
        try:
            with open(text[1:], encoding="utf-8") as f:
                text = f.read()
        except OSError as exc:
            fail(f"cannot read {what} from {text[1:]}: {exc.strerror}", 2)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        fail(f"{what} is not JSON: {exc}", 2)
