"""The retention archive: one compressed file per run, written before its rows go.

A file is ``DIR/<YYYY-MM-DD>/<workflow id>.<run id>.json.gz`` (the day the run
ended, UTC; the workflow id percent-quoted), so a run is found by workflow id
and date, or by run id alone. Its body is ``keepgoing history export``'s
format, ``{"events": [...]}``, with the run's row beside the events
(``"run"``: status, result, error, lineage); ``keepgoing replay``,
``keepgoing history show`` and the UI's replay page read it as they read an
export. A file is written to a temporary name, flushed to disk and renamed, so
a crash leaves either the whole file or none; writing it again (a sweep that
died before its delete) replaces it with the same content. An archive given as
a URL (``s3://...``, ``memory://...``) is written and read through fsspec
(``archive_fs.py``, the ``keepgoing[archive]`` extra), under the same names.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import os
import urllib.parse
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from keepgoing._history.codec import encode
from keepgoing._history.events import Event
from keepgoing._store.records import RunRecord
from keepgoing._worker.archive_fs import find_in_url, is_url, read_url, write_url
from keepgoing.errors import ConfigurationError

__all__ = [
    "archive_path",
    "find_archived",
    "locate",
    "read_archive",
    "read_history_text",
    "write_archive",
]

SUFFIX = ".json.gz"


def archive_path(root: str | os.PathLike[str], run: RunRecord) -> Path:
    """Where ``run``'s archive goes under the folder ``root``."""
    return Path(root) / _relative(run)


def _relative(run: RunRecord) -> str:
    ended = run.ended_at if run.ended_at is not None else run.updated_at
    day = datetime.fromtimestamp(ended, UTC).strftime("%Y-%m-%d")
    name = urllib.parse.quote(run.workflow_id, safe="-_@+=,")
    return f"{day}/{name}.{run.run_id}{SUFFIX}"


def run_body(run: RunRecord) -> dict[str, Any]:
    """The run's row as the archive keeps it."""
    error = dataclasses.asdict(run.error) if run.error is not None else None
    return {
        "run_id": run.run_id,
        "workflow_id": run.workflow_id,
        "workflow_name": run.workflow_name,
        "status": run.status,
        "task_queue": run.task_queue,
        "code_version": run.code_version,
        "created_at": run.created_at,
        "ended_at": run.ended_at,
        "result": run.result,
        "error": error,
        "parent_workflow_id": run.parent_workflow_id,
        "parent_run_id": run.parent_run_id,
        "continued_from": run.continued_from,
        "continued_to": run.continued_to,
        "group_revision": run.group_revision,
    }


def write_archive(root: str | os.PathLike[str], run: RunRecord, events: list[Event]) -> Path | str:
    """Write ``run`` and its history; the file's path once it is on disk (its URL
    when ``root`` is a URL).

    Raises:
        ConfigurationError: the archive folder cannot be written.
    """
    body = {"run": run_body(run), "events": [encode(e) for e in events]}
    data = gzip.compress(json.dumps(body, ensure_ascii=False, default=str).encode(), mtime=0)
    if is_url(root):
        return write_url(str(root), _relative(run), data)
    path = archive_path(root, run)
    tmp = path.with_name(path.name + ".part")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
        _sync_folder(path.parent)
    except OSError as exc:
        raise ConfigurationError(f"cannot write the retention archive {path}: {exc}") from None
    return path


def _sync_folder(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_history_text(path: str | os.PathLike[str]) -> str:
    """A history file's text: an export, or an archive (gzip, by its content).

    Raises:
        OSError: it cannot be read.
        ValueError: it is gzip but broken, or not UTF-8.
    """
    raw = read_url(path) if is_url(path) else Path(path).read_bytes()
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as exc:
            raise ValueError(f"a broken compressed file ({exc})") from None
    return raw.decode("utf-8")


def read_archive(path: str | os.PathLike[str]) -> dict[str, Any]:
    """An archive's body: ``{"run": {...}, "events": [...]}``.

    Raises:
        ConfigurationError: it cannot be read, or is not an archive.
    """
    try:
        body = json.loads(read_history_text(path))
    except (OSError, ValueError) as exc:
        raise ConfigurationError(f"cannot read the archive {path}: {exc}") from None
    if not isinstance(body, dict) or not isinstance(body.get("events"), list):
        raise ConfigurationError(f"{path} is not a run archive (no events list)")
    return body


def find_archived(root: str | os.PathLike[str], ident: str) -> list[Path]:
    """The archives under ``root`` of run id ``ident``, or of workflow id ``ident``
    (every run of it, oldest day first)."""
    base = Path(root)
    if not base.is_dir() or not ident or "/" in ident or ident in (".", ".."):
        return []
    by_run = sorted(base.glob(f"*/*.{_glob_quote(ident)}{SUFFIX}"))
    if by_run:
        return by_run
    name = _glob_quote(urllib.parse.quote(ident, safe="-_@+=,"))
    return sorted(base.glob(f"*/{name}.*{SUFFIX}"))


def locate(root: str | os.PathLike[str], ident: str) -> list[str]:
    """:func:`find_archived` for a folder or a URL: the archives' paths (or URLs)."""
    if not is_url(root):
        return [str(p) for p in find_archived(root, ident)]
    if not ident or "/" in ident or ident in (".", ".."):
        return []
    name = _glob_quote(urllib.parse.quote(ident, safe="-_@+=,"))
    return find_in_url(str(root), f"*/*.{_glob_quote(ident)}{SUFFIX}", f"*/{name}.*{SUFFIX}")


def _glob_quote(text: str) -> str:
    return "".join(f"[{c}]" if c in "*?[]" else c for c in text)
