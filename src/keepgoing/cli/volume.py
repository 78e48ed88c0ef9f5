"""``keepgoing volume ls | cat | versions | diff | rollback | fork | gc``: versioned volumes.

The commands open the store directly (``--store``, else ``KEEPGOING_STORE``,
else the project's SQLite file; its URL is printed on stderr) and never create a
volume.
"""

from __future__ import annotations

import base64
import datetime as dt
import sys
from typing import Annotated

import typer
from rich.table import Table

from keepgoing._store.volume_records import VersionInfo
from keepgoing._volumes import access
from keepgoing._volumes.volume import Volume
from keepgoing.cli._app import app
from keepgoing.cli._common import (
    JsonOption,
    StoreOption,
    add_row,
    announce_store,
    cli_errors,
    console,
    emit_json,
)

__all__ = ["volume_app"]

volume_app = typer.Typer(
    help="Read, compare, roll back and fork versioned volumes (agent memory).",
    no_args_is_help=True,
)
app.add_typer(volume_app, name="volume")
app.add_typer(volume_app, name="volumes", hidden=True)

NameArg = Annotated[str, typer.Argument(help="The volume's name.", show_default=False)]
RefOption = Annotated[str, typer.Option("--ref", help="The ref (line of versions).")]
VersionOption = Annotated[
    int | None,
    typer.Option("--version", "-v", help="Read this version (default: the ref's latest)."),
]


def _open(name: str, ref: str, store: str | None, version: int | None = None) -> Volume:
    url = announce_store(store)
    return Volume(name, ref=ref, store=url, version_id=version, create_if_missing=False)


@volume_app.command("ls")
def ls(
    name: Annotated[
        str | None,
        typer.Argument(help="The volume's name; without it, list the volumes.", show_default=False),
    ] = None,
    prefix: Annotated[str, typer.Argument(help="Only files under this folder.")] = "",
    version: VersionOption = None,
    ref: RefOption = "main",
    recursive: Annotated[
        bool, typer.Option("--recursive/--no-recursive", "-r/-R", help="Descend into folders.")
    ] = True,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """List the files of volume NAME (at --version), or every volume.

    Example:

        keepgoing volume ls agent-memory notes --version 3
    """
    with cli_errors():
        if name is None:
            target = access.shared_store(store)
            names = access.call(target, target.volume_list())
            _print_names(names, as_json)
            return
        files = _open(name, ref, store, version).listdir(prefix, recursive=recursive)
    if as_json:
        emit_json(files)
        return
    table = Table(
        "path", "size", "updated", "sha256", title=f"{name} ({ref})", title_justify="left"
    )
    for f in files:
        add_row(table, f.path, f"{f.size:,}", _when(f.updated_at), f.hash[:12])
    console.print(table)


@volume_app.command("cat")
def cat(
    name: NameArg,
    path: Annotated[str, typer.Argument(help="The file's path in the volume.", show_default=False)],
    version: VersionOption = None,
    ref: RefOption = "main",
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Print file PATH of volume NAME (at --version), byte for byte.

    Example:

        keepgoing volume cat agent-memory lessons.md --version 2
    """
    with cli_errors():
        volume = _open(name, ref, store, version)
        data = volume.read_file(path)
        shown = version if version is not None else _latest_id(volume)
    if not as_json:
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
        return
    body: dict[str, object] = {"volume": name, "ref": ref, "version": shown, "path": path}
    try:
        body["text"] = data.decode("utf-8")
    except UnicodeDecodeError:
        body["base64"] = base64.b64encode(data).decode("ascii")
    emit_json(body)


@volume_app.command("versions")
def versions(
    name: NameArg,
    ref: RefOption = "main",
    limit: Annotated[int, typer.Option(help="Show at most this many, the newest.")] = 100,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """List the versions of volume NAME on --ref, oldest first, with the step that made each.

    Example:

        keepgoing volume versions agent-memory --limit 20
    """
    with cli_errors():
        found = _open(name, ref, store).versions(limit=limit)
    if as_json:
        emit_json(found)
        return
    table = Table("version", "parent", "created", "made by", "message", "paths")
    for v in found:
        add_row(
            table,
            str(v.id),
            "" if v.parent_id is None else str(v.parent_id),
            _when(v.created_at),
            _maker(v),
            v.message,
            ", ".join(v.paths),
        )
    console.print(table)


@volume_app.command("diff")
def diff(
    name: NameArg,
    a: Annotated[int, typer.Argument(help="The older version (0: the empty volume).")],
    b: Annotated[int, typer.Argument(help="The newer version (0: the empty volume).")],
    ref: RefOption = "main",
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show what changed in volume NAME from version A to version B, as a unified diff.

    Example:

        keepgoing volume diff agent-memory 3 5
    """
    with cli_errors():
        changes = _open(name, ref, store).diff(a or None, b or None)
    if as_json:
        emit_json(changes)
        return
    sys.stdout.write(changes.text())
    for kind, paths in (("added", changes.added), ("removed", changes.removed)):
        for path in paths:
            if path not in changes.unified:
                sys.stdout.write(f"{kind}: {path} (binary or large)\n")
    for path in changes.changed:
        if path not in changes.unified:
            sys.stdout.write(f"changed: {path} (binary or large)\n")
    if not changes:
        sys.stdout.write(f"versions {a} and {b} hold the same files\n")


@volume_app.command("rollback")
def rollback(
    name: NameArg,
    version: Annotated[int, typer.Argument(help="The version to return to.")],
    ref: RefOption = "main",
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Make a new version of volume NAME equal to VERSION. Nothing is deleted.

    Example:

        keepgoing volume rollback agent-memory 3
    """
    with cli_errors():
        made = _open(name, ref, store).rollback(version)
    if as_json:
        emit_json(made)
    elif made is not None:
        console.print(f"version {made.id} of {name} ({ref}) equals version {version}")


@volume_app.command("fork")
def fork(
    name: NameArg,
    new_ref: Annotated[str, typer.Argument(help="The new ref's name.", show_default=False)],
    ref: RefOption = "main",
    version: Annotated[
        int | None, typer.Option("--version", "-v", help="Fork at this version (default: latest).")
    ] = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Create ref NEW_REF of volume NAME at --ref's latest version (or --version).

    Example:

        keepgoing volume fork agent-memory experiment --version 4
    """
    with cli_errors():
        volume = _open(name, ref, store, version)
        forked = volume.fork(new_ref)
        head = forked.latest_version()
    if as_json:
        emit_json({"volume": name, "ref": new_ref, "from": ref, "version": head})
    else:
        at = f"version {head.id}" if head else "no version"
        console.print(f"created ref {new_ref} of {name} at {at}")


@volume_app.command("gc")
def gc(
    name: NameArg,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print what would be dropped; delete nothing.")
    ] = False,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Drop the versions of volume NAME its retention policy lets go, and unused chunks.

    The policy is the one ``Volume(NAME, keep_versions=N, keep_for="30d")`` set.
    A ref's head, a fork's base and a version an open run wrote are never dropped.

    Example:

        keepgoing volume gc agent-memory --dry-run
    """
    with cli_errors():
        result = _open(name, "main", store).gc(dry_run=dry_run)
    if as_json:
        emit_json(result)
        return
    verb = "would drop" if dry_run else "dropped"
    ids = ", ".join(str(v) for _, v in result.versions) or "none"
    console.print(
        f"{name}: {verb} {len(result.versions)} versions ({ids}), {result.objects} objects"
    )


def _print_names(names: list[str], as_json: bool) -> None:
    if as_json:
        emit_json(names)
    else:
        for name in names:
            console.print(name, markup=False)


def _latest_id(volume: Volume) -> int | None:
    latest = volume.latest_version()
    return latest.id if latest else None


def _maker(v: VersionInfo) -> str:
    if v.run_id is None:
        return "outside a task"
    return f"run {v.run_id[:12]} step {v.step} attempt {v.attempt}"


def _when(moment: float) -> str:
    return dt.datetime.fromtimestamp(moment, dt.UTC).strftime("%Y-%m-%d %H:%M:%S")
