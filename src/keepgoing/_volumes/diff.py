"""Comparing two listings of a volume, and unified diffs of the text files that differ."""

from __future__ import annotations

import difflib
from collections.abc import Callable

from keepgoing._store.volume_records import FileInfo, VolumeDiff

__all__ = ["TEXT_LIMIT", "changes", "compare", "listing", "text_of", "unified"]

TEXT_LIMIT = 1024 * 1024


def compare(
    a: int | None,
    b: int | None,
    old: list[FileInfo],
    new: list[FileInfo],
    read: Callable[[int | None, str], bytes],
) -> VolumeDiff:
    """The diff from listing ``old`` (version ``a``) to ``new`` (version ``b``).

    ``read(version, path)`` fetches content for the unified diffs.
    """
    before = {f.path: f for f in old}
    after = {f.path: f for f in new}
    added, removed, changed = changes(before, after)
    found: dict[str, str] = {}
    for path in (*added, *removed, *changed):
        left = _text(read, a, before.get(path))
        right = _text(read, b, after.get(path))
        if left is not None and right is not None:
            found[path] = unified(path, left, right, path in before, path in after)
    return VolumeDiff(a, b, added, removed, changed, found)


def changes(
    before: dict[str, FileInfo], after: dict[str, FileInfo]
) -> tuple[list[str], list[str], list[str]]:
    """The paths ``(added, removed, changed)`` from ``before`` to ``after``, each sorted."""
    added = sorted(after.keys() - before.keys())
    removed = sorted(before.keys() - after.keys())
    changed = sorted(p for p in before.keys() & after.keys() if before[p].hash != after[p].hash)
    return added, removed, changed


def unified(path: str, left: str, right: str, in_before: bool, in_after: bool) -> str:
    """The unified diff of one file's text (``""`` for a side where it is absent)."""
    lines = difflib.unified_diff(
        left.splitlines(keepends=True),
        right.splitlines(keepends=True),
        fromfile=f"a/{path}" if in_before else "/dev/null",
        tofile=f"b/{path}" if in_after else "/dev/null",
    )
    return "".join(_terminated(line) for line in lines)


def text_of(data: bytes) -> str | None:
    """``data`` as text, or None when it is binary (a NUL byte) or not UTF-8."""
    if b"\x00" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def listing(files: list[FileInfo], prefix: str, recursive: bool) -> list[FileInfo]:
    """The entries of ``files`` under folder ``prefix`` ("" for all).

    Non-recursive listings show each sub-folder once, as ``name/``.
    """
    inside = [f for f in files if not prefix or f.path == prefix or f.path.startswith(prefix + "/")]
    if recursive:
        return inside
    start = len(prefix) + 1 if prefix else 0
    entries: dict[str, FileInfo] = {}
    for f in inside:
        rest = f.path[start:]
        if "/" not in rest or f.path == prefix:
            entries[f.path] = f
            continue
        folder = f.path[: start + rest.index("/") + 1]
        seen = entries.get(folder)
        size = f.size + (seen.size if seen else 0)
        newest = max(f.updated_at, seen.updated_at if seen else f.updated_at)
        entries[folder] = FileInfo(folder, size, newest, "")
    return [entries[p] for p in sorted(entries)]


def _text(
    read: Callable[[int | None, str], bytes], version: int | None, f: FileInfo | None
) -> str | None:
    if f is None:
        return ""
    if f.size > TEXT_LIMIT:
        return None
    return text_of(read(version, f.path))


def _terminated(line: str) -> str:
    return line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"
