"""Checking what users pass in: file paths, volume and ref names, file sizes.

Paths are normalised (``./a//b/`` -> ``a/b``) and refused with a
:class:`~keepgoing.errors.VolumeError` that names the problem when they are
empty, absolute, climb out with ``..``, or hold NUL or other control bytes.
"""

from __future__ import annotations

import os
import re

from keepgoing.errors import VolumeError

__all__ = [
    "DEFAULT_MAX_FILE_SIZE",
    "NAME_PATTERN",
    "PATH_PATTERN",
    "PREFIX_PATTERN",
    "MAX_PATH_BYTES",
    "check_name",
    "check_size",
    "folder_prefix",
    "max_file_size",
    "normalise_path",
]

DEFAULT_MAX_FILE_SIZE = 64 * 1024 * 1024
MAX_PATH_BYTES = 1024
_SIZE_ENV = "KEEPGOING_VOLUME_MAX_FILE_SIZE"
# The rules above as JSON Schema patterns, for the HTTP API's spec. A path: not
# absolute, no `..` segment, some segment other than "" and ".", no control character.
PATH_PATTERN = (
    r"^(?![/\\])(?!(?:[^/]*/)*\.\.(?:/|$))"
    r"(?=(?:[^/]*/)*(?:[^/.]|\.[^/.]|\.\.[^/])[^/]*(?:/|$))[^\x00-\x1f\x7f]+$"
)
#: A listing prefix: the same, or only `/` and `.` (the whole volume), or empty.
PREFIX_PATTERN = r"^(?!(?:[^/]*/)*\.\.(?:/|$))(?:[/.]*|(?![/\\])[^\x00-\x1f\x7f]*)$"
#: Volume and ref names.
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"
_NAME = re.compile(NAME_PATTERN)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def normalise_path(path: object, what: str = "path", *, check_length: bool = True) -> str:
    """``path`` as a clean relative ``a/b/c`` path.

    ``check_length=False`` is for a lookup: a path longer than any stored one
    is not wrong to ask for, it just finds nothing.

    Raises:
        VolumeError: not a string, empty, absolute, with a ``..`` segment, or with
            NUL or another control character.
    """
    text = _as_text(path, what)
    if "\x00" in text:
        raise VolumeError(f"{what} {text!r} contains a NUL byte")
    if _CONTROL.search(text):
        raise VolumeError(f"{what} {text!r} contains a control character")
    if text.startswith(("/", "\\")):
        raise VolumeError(f"{what} {text!r} is absolute; volume paths are relative, like 'a/b.md'")
    parts = [part for part in text.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise VolumeError(f"{what} {text!r} contains '..'; volume paths cannot leave the volume")
    if not parts:
        raise VolumeError(f"{what} {text!r} names no file")
    clean = "/".join(parts)
    if check_length and len(clean.encode("utf-8", "surrogatepass")) > MAX_PATH_BYTES:
        raise VolumeError(f"{what} is longer than {MAX_PATH_BYTES} bytes")
    return clean


def folder_prefix(prefix: object, *, check_length: bool = True) -> str:
    """A listing prefix: ``""`` for the whole volume, else a normalised folder path."""
    text = _as_text(prefix, "prefix")
    if text.strip("/.") == "" and ".." not in text:
        return ""
    return normalise_path(text, "prefix", check_length=check_length)


def check_name(name: object, what: str) -> str:
    """A volume or ref name: 1-128 letters, digits and ``._-``, starting with a letter or digit.

    Raises:
        VolumeError: any other name.
    """
    if not isinstance(name, str) or not _NAME.match(name):
        raise VolumeError(
            f"{what} {name!r} is not valid: use 1-128 letters, digits and ._- "
            "starting with a letter or digit"
        )
    return name


def check_size(path: str, size: int, limit: int) -> None:
    """Refuse a file of ``size`` bytes over ``limit``, before anything is stored.

    Raises:
        VolumeError: the file is too large.
    """
    if size > limit:
        raise VolumeError(
            f"{path!r} is {size:,} bytes, over the volume's limit of {limit:,} bytes per file "
            f"(set Volume(max_file_size=...) or {_SIZE_ENV}); nothing was stored"
        )


def max_file_size(value: int | None) -> int:
    """The per-file limit: ``value``, else ``KEEPGOING_VOLUME_MAX_FILE_SIZE``, else 64 MiB.

    Raises:
        VolumeError: the limit is not a positive integer.
    """
    if value is None:
        raw = os.environ.get(_SIZE_ENV)
        if not raw:
            return DEFAULT_MAX_FILE_SIZE
        try:
            value = int(raw)
        except ValueError:
            raise VolumeError(f"{_SIZE_ENV}={raw!r} is not a number of bytes") from None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise VolumeError(f"max_file_size must be a positive number of bytes, not {value!r}")
    return value


def _as_text(path: object, what: str) -> str:
    if isinstance(path, os.PathLike):
        path = os.fspath(path)
    if not isinstance(path, str):
        raise VolumeError(f"{what} must be a str, not {type(path).__name__}")
    return path
