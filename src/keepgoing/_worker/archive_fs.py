"""Retention archives behind an fsspec URL: ``[retention] archive = "s3://bucket/kg"``.

An archive given as a URL (``scheme://...``: ``s3://``, ``gs://``, ``memory://``,
``file://``, any file system fsspec knows) is written and read through
`fsspec <https://filesystem-spec.readthedocs.io>`_, which comes with the
``keepgoing[archive]`` extra (an object store needs its own package too, such as
``s3fs``). A plain folder path does not use it (``archive.py`` writes it with
fsync and rename). Each file is written whole in one put (an object store's put
is atomic: the object is there in full or not at all), under the same names as
in a folder: ``<root>/<YYYY-MM-DD>/<workflow id>.<run id>.json.gz``.
"""

from __future__ import annotations

import re
from typing import Any, TypeGuard

from keepgoing.errors import ConfigurationError

__all__ = ["check_url", "find_in_url", "is_url", "read_url", "write_url"]

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
EXTRA = 'pip install "keepgoing[archive]"'


def is_url(root: object) -> TypeGuard[str]:
    """Whether ``root`` names an fsspec file system (``scheme://...``), not a folder."""
    return isinstance(root, str) and bool(_SCHEME.match(root))


def _fs(url: str) -> tuple[Any, str]:
    """The file system of ``url`` and the path inside it.

    Raises:
        ConfigurationError: fsspec (or the scheme's own package) is not installed,
            or fsspec knows no such scheme.
    """
    try:
        import fsspec  # type: ignore[import-untyped]  # noqa: PLC0415  (an optional extra)
    except ImportError:
        raise ConfigurationError(
            f"the retention archive {url!r} is a URL, which needs fsspec: {EXTRA}"
        ) from None
    try:
        fs, path = fsspec.core.url_to_fs(url)
    except ImportError as exc:
        raise ConfigurationError(
            f"the retention archive {url!r} needs a package fsspec names: {exc}"
        ) from None
    except (ValueError, TypeError) as exc:
        raise ConfigurationError(f"the retention archive {url!r} is not usable: {exc}") from None
    return fs, str(path).rstrip("/")


def _url(fs: Any, path: str) -> str:
    return str(fs.unstrip_protocol(path))


def check_url(url: str) -> None:
    """Raise :class:`ConfigurationError` unless ``url``'s file system can be opened."""
    _fs(url)


def write_url(root: str, relative: str, data: bytes) -> str:
    """Write ``data`` to ``relative`` under the URL ``root``; the file's URL.

    Raises:
        ConfigurationError: the file system cannot be opened or written.
    """
    fs, base = _fs(root)
    path = f"{base}/{relative}"
    try:
        fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
        fs.pipe_file(path, data)
    except OSError as exc:
        raise ConfigurationError(
            f"cannot write the retention archive {root}/{relative}: {exc}"
        ) from None
    return _url(fs, path)


def read_url(url: str) -> bytes:
    """The bytes of the file at ``url``.

    Raises:
        OSError: it cannot be read (FileNotFoundError when it is missing).
        ConfigurationError: the file system cannot be opened.
    """
    fs, path = _fs(url)
    data: bytes = fs.cat_file(path)
    return data


def find_in_url(root: str, by_run: str, by_workflow: str) -> list[str]:
    """The URLs under ``root`` matching the glob ``by_run`` (``*/*.<run id>.json.gz``),
    else ``by_workflow``, sorted (oldest day first)."""
    fs, base = _fs(root)
    for pattern in (by_run, by_workflow):
        found = sorted(str(p) for p in fs.glob(f"{base}/{pattern}"))
        if found:
            return [_url(fs, p) for p in found]
    return []
