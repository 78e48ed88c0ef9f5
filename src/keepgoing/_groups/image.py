"""``Image``: an immutable, fluent, content-hashed spec of a worker's environment.

An image is a base (``debian_slim`` with a Python version) and an ordered
tuple of :class:`ImageStep`. Every fluent method returns a new image; none
changes the one it is called on.

The identity of an image is its content. :meth:`Image.canonical_json` writes
the spec with sorted keys and sorted, de-duplicated package lists, so two
images built separately from the same packages in a different order are
equal and share :attr:`Image.hash`. Local files and directories are read
when they are added and enter the hash by the SHA-256 of their bytes, not by
where they live: a changed file changes the hash, a moved checkout does not.
(The local path is kept in the JSON, so :meth:`Image.from_json` can find the
files again, but it is left out of the hash.)

Steps are validated when they are added, with errors that name the step and
the value, because a bad package name found later, inside a container build,
is far harder to trace.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from types import MappingProxyType
from typing import Any

from keepgoing.errors import ConfigurationError

__all__ = ["IMAGE_STEP_KINDS", "Image", "ImageStep"]

#: The step kinds an image may hold, in the vocabulary of the fluent methods.
IMAGE_STEP_KINDS = frozenset(
    {
        "pip_install",
        "uv_pip_install",
        "apt_install",
        "run_commands",
        "env",
        "add_local_file",
        "add_local_dir",
        "workdir",
    }
)

_FORMAT = 1
_BASE = "debian_slim"
_MIN_MINOR = 11  # keepgoing itself needs Python 3.11
_PYTHON_VERSION = re.compile(r"3\.(\d{1,2})(?:\.\d{1,3})?")
_APT_PACKAGE = re.compile(r"[a-z0-9][a-z0-9+.\-]*(?:[:][a-z0-9]+)?(?:=[A-Za-z0-9.+~:\-]+)?")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Directories that are build or editor debris, never part of an image.
_SKIPPED_DIRS = frozenset(
    {".git", "__pycache__", ".venv", ".mypy_cache", ".ruff_cache", ".pytest_cache"}
)
_CHUNK = 1 << 20


@dataclass(frozen=True, eq=False)
class ImageStep:
    """One step of an :class:`Image`: its ``kind`` and its read-only ``args``.

    The ``args`` of each kind:

    - ``pip_install`` / ``uv_pip_install``: ``{"packages": ("a", "b")}``, sorted.
    - ``apt_install``: ``{"packages": (...)}``, sorted.
    - ``run_commands``: ``{"commands": (...)}``, in the order given.
    - ``env``: ``{"vars": {"NAME": "value"}}``.
    - ``add_local_file``: ``{"local": abs path, "remote": abs path, "sha256": hex}``.
    - ``add_local_dir``: ``{"local": ..., "remote": ..., "sha256": hex of the tree,
      "files": ((relative path, sha256), ...)}``.
    - ``workdir``: ``{"path": abs path}``.
    """

    kind: str
    args: Mapping[str, Any]

    def to_json_value(self, *, with_local: bool = True) -> dict[str, Any]:
        """This step as plain JSON values; ``with_local=False`` drops local paths."""
        args = {k: _thaw(v) for k, v in self.args.items() if with_local or k != "local"}
        return {"kind": self.kind, "args": args}

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ImageStep):
            return NotImplemented
        return self.to_json_value() == other.to_json_value()

    def __hash__(self) -> int:
        return hash(_dumps(self.to_json_value()))


@dataclass(frozen=True, eq=False)
class Image:
    """An immutable worker image spec; start from :meth:`Image.debian_slim`.

    Example:
        >>> numpy_image = Image.debian_slim("3.12").pip_install(["numpy"])
        >>> numpy_image == Image.debian_slim("3.12").pip_install("numpy")
        True

    Equality and ``hash()`` follow the content (:attr:`hash`), so images can
    key dictionaries: tasks with equal images share a group.
    """

    python_version: str
    steps: tuple[ImageStep, ...] = ()

    def __post_init__(self) -> None:
        # The constructor is public too (it is a dataclass): hold it to the same rules.
        _check_python_version(self.python_version)
        if not isinstance(self.steps, tuple) or not all(
            isinstance(s, ImageStep) and s.kind in IMAGE_STEP_KINDS for s in self.steps
        ):
            raise ConfigurationError("Image steps must be a tuple of ImageStep of known kinds")

    # ---- construction -------------------------------------------------

    @classmethod
    def debian_slim(cls, python_version: str = "3.12") -> Image:
        """A Debian slim base with CPython ``python_version``: ``"3.12"``, ``"3.12.4"``..."""
        return cls(_check_python_version(python_version))

    @classmethod
    def from_json(cls, text: str) -> Image:
        """Rebuild an image from :meth:`canonical_json`; the text is validated like fresh input.

        Local files are not read again: their recorded digests are kept.
        """
        try:
            data = json.loads(text)
        except (TypeError, ValueError) as exc:
            raise ConfigurationError(f"image JSON is not valid JSON: {exc}") from None
        if not isinstance(data, dict):
            raise ConfigurationError("image JSON must be an object")
        if data.get("format") != _FORMAT:
            raise ConfigurationError(
                f"image JSON has format {data.get('format')!r}; expected {_FORMAT}"
            )
        if data.get("base") != _BASE:
            raise ConfigurationError(
                f"image JSON has base {data.get('base')!r}; expected {_BASE!r}"
            )
        image = cls.debian_slim(data.get("python_version"))  # type: ignore[arg-type]
        raw_steps = data.get("steps")
        if not isinstance(raw_steps, list):
            raise ConfigurationError("image JSON 'steps' must be a list")
        return cls(image.python_version, tuple(_step_from_json(raw) for raw in raw_steps))

    # ---- fluent steps -------------------------------------------------

    def pip_install(self, *packages: str | Iterable[str]) -> Image:
        """Install Python packages with pip (requirement strings, or lists of them)."""
        return self._with("pip_install", packages=_requirements("pip_install", packages))

    def uv_pip_install(self, *packages: str | Iterable[str]) -> Image:
        """Install Python packages with ``uv pip install`` (faster, same requirement syntax)."""
        return self._with("uv_pip_install", packages=_requirements("uv_pip_install", packages))

    def apt_install(self, *packages: str | Iterable[str]) -> Image:
        """Install Debian packages with apt: ``"curl"``, or pinned as ``"curl=7.88.1-10"``."""
        names = _strings("apt_install", packages, what="package")
        for name in names:
            if not _APT_PACKAGE.fullmatch(name):
                raise ConfigurationError(
                    f"apt_install: {name!r} is not a Debian package name "
                    "(lower-case letters, digits and '+.-', optionally '=version')"
                )
        return self._with("apt_install", packages=tuple(sorted(set(names))))

    def run_commands(self, *commands: str | Iterable[str]) -> Image:
        """Run shell commands at build time, in order (one ``RUN`` each)."""
        cmds = _strings("run_commands", commands, what="command")
        for cmd in cmds:
            if "\n" in cmd or "\r" in cmd:
                raise ConfigurationError(
                    f"run_commands: {cmd!r} spans several lines; pass each line as its own command"
                )
        return self._with("run_commands", commands=tuple(cmds))

    def env(self, mapping: Mapping[str, str]) -> Image:
        """Set environment variables baked into the image (in clear: secrets go in ``secrets=``)."""
        if not isinstance(mapping, Mapping) or not mapping:
            raise ConfigurationError("env: expected a non-empty mapping of names to string values")
        out: dict[str, str] = {}
        for name, value in mapping.items():
            if not isinstance(name, str) or not _ENV_NAME.fullmatch(name):
                raise ConfigurationError(
                    f"env: {name!r} is not an environment variable name (letters, digits, '_')"
                )
            if not isinstance(value, str):
                raise ConfigurationError(
                    f"env: the value of {name} is a {type(value).__name__}, not a string; "
                    "image env values are baked into the image in clear, so secrets go in secrets="
                )
            if "\x00" in value or "\n" in value or "\r" in value:
                raise ConfigurationError(f"env: the value of {name} holds a newline or NUL byte")
            out[name] = value
        return self._with("env", vars=MappingProxyType(dict(sorted(out.items()))))

    def add_local_file(self, local: str | os.PathLike[str], remote: str) -> Image:
        """Copy the local file ``local`` to the absolute path ``remote`` in the image."""
        path = _local_path("add_local_file", local)
        if not path.is_file():
            raise ConfigurationError(f"add_local_file: {str(local)!r} is not a file")
        return self._with(
            "add_local_file",
            local=str(path),
            remote=_remote_path("add_local_file", remote),
            sha256=_file_digest(path),
        )

    def add_local_dir(self, local: str | os.PathLike[str], remote: str) -> Image:
        """Copy the local directory ``local`` to the absolute path ``remote`` in the image.

        ``.git``, ``__pycache__``, ``.venv`` and tool caches are skipped.
        """
        path = _local_path("add_local_dir", local)
        if not path.is_dir():
            raise ConfigurationError(f"add_local_dir: {str(local)!r} is not a directory")
        files = tuple((rel, _file_digest(path / rel)) for rel in _tree(path))
        tree = hashlib.sha256(_dumps([list(f) for f in files]).encode()).hexdigest()
        return self._with(
            "add_local_dir",
            local=str(path),
            remote=_remote_path("add_local_dir", remote),
            sha256=tree,
            files=files,
        )

    def workdir(self, path: str) -> Image:
        """Set the working directory (absolute) for later steps and for the worker."""
        return self._with("workdir", path=_remote_path("workdir", path))

    # ---- identity -------------------------------------------------------

    @property
    def base(self) -> str:
        """The base image family: always ``"debian_slim"`` for now."""
        return _BASE

    def canonical_json(self) -> str:
        """The spec as canonical JSON (sorted keys, no spaces); :meth:`from_json` reads it back."""
        return _dumps(self._json_value(with_local=True))

    @property
    def hash(self) -> str:
        """SHA-256 hex of the canonical JSON without local paths: equal content, equal hash."""
        return hashlib.sha256(_dumps(self._json_value(with_local=False)).encode()).hexdigest()

    def steps_of(self, kind: str) -> tuple[ImageStep, ...]:
        """The steps of one ``kind``, in order."""
        return tuple(step for step in self.steps if step.kind == kind)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Image):
            return NotImplemented
        return self.hash == other.hash

    def __hash__(self) -> int:
        return hash(self.hash)

    def __repr__(self) -> str:
        n, digest = len(self.steps), self.hash[:12]
        return f"Image.debian_slim({self.python_version!r}) [{n} steps, {digest}]"

    # ---- internals ------------------------------------------------------

    def _with(self, kind: str, **args: Any) -> Image:
        return Image(self.python_version, (*self.steps, ImageStep(kind, MappingProxyType(args))))

    def _json_value(self, *, with_local: bool) -> dict[str, Any]:
        return {
            "format": _FORMAT,
            "base": _BASE,
            "python_version": self.python_version,
            "steps": [step.to_json_value(with_local=with_local) for step in self.steps],
        }


def _dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _thaw(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _thaw(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [_thaw(v) for v in value]
    return value


def _check_python_version(version: object) -> str:
    if not isinstance(version, str) or not _PYTHON_VERSION.fullmatch(version):
        raise ConfigurationError(
            f"debian_slim: python_version {version!r} is not a CPython version "
            "like '3.12' or '3.12.4'"
        )
    minor = int(_PYTHON_VERSION.fullmatch(version).group(1))  # type: ignore[union-attr]
    if minor < _MIN_MINOR:
        raise ConfigurationError(
            f"debian_slim: python_version {version!r} is too old; "
            f"keepgoing needs Python 3.{_MIN_MINOR} or newer"
        )
    return version


def _flatten(step: str, items: tuple[object, ...]) -> Iterator[object]:
    for item in items:
        if isinstance(item, str):
            yield item
        elif isinstance(item, Iterable) and not isinstance(item, bytes | Mapping):
            yield from item
        else:
            raise ConfigurationError(
                f"{step}: expected strings or lists of strings, got {type(item).__name__}"
            )


def _strings(step: str, items: tuple[object, ...], *, what: str) -> list[str]:
    out: list[str] = []
    for item in _flatten(step, items):
        if not isinstance(item, str):
            raise ConfigurationError(
                f"{step}: each {what} must be a string, got {type(item).__name__}"
            )
        text = item.strip()
        if not text:
            raise ConfigurationError(f"{step}: a {what} is empty or only whitespace")
        if "\x00" in text:
            raise ConfigurationError(f"{step}: {what} {item!r} holds a NUL byte")
        out.append(text)
    if not out:
        raise ConfigurationError(f"{step}: no {what}s given")
    return out


def _requirements(step: str, items: tuple[object, ...]) -> tuple[str, ...]:
    reqs = _strings(step, items, what="package")
    for req in reqs:
        if req.startswith("-"):
            raise ConfigurationError(
                f"{step}: {req!r} is an installer option, not a requirement; pass packages only"
            )
        if any(ch in req for ch in "\n\r\t"):
            raise ConfigurationError(f"{step}: requirement {req!r} holds a newline or tab")
    # Sorted and de-duplicated: the order packages are listed in changes nothing.
    return tuple(sorted(set(reqs)))


def _local_path(step: str, local: object) -> Path:
    if not isinstance(local, str | os.PathLike) or not os.fspath(local):
        raise ConfigurationError(f"{step}: the local path must be a non-empty path, got {local!r}")
    path = Path(local).expanduser()
    if not path.exists():
        raise ConfigurationError(f"{step}: {str(local)!r} does not exist")
    return path.resolve()


def _remote_path(step: str, remote: object) -> str:
    if not isinstance(remote, str) or not remote.strip():
        raise ConfigurationError(
            f"{step}: the image path must be a non-empty string, got {remote!r}"
        )
    if any(ch in remote for ch in "\x00\n\r"):
        raise ConfigurationError(f"{step}: image path {remote!r} holds a newline or NUL byte")
    pure = PurePosixPath(remote)
    if not pure.is_absolute():
        raise ConfigurationError(
            f"{step}: image path {remote!r} must be absolute, like '/app/data'"
        )
    if ".." in pure.parts:
        raise ConfigurationError(f"{step}: image path {remote!r} must not contain '..'")
    return str(pure)


def _file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    try:
        with path.open("rb") as fh:
            while chunk := fh.read(_CHUNK):
                digest.update(chunk)
    except OSError as exc:
        raise ConfigurationError(f"cannot read local file {str(path)!r}: {exc.strerror}") from None
    return digest.hexdigest()


def _tree(root: Path) -> list[str]:
    found: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIPPED_DIRS)
        for name in filenames:
            full = Path(dirpath, name)
            if full.is_file() and not name.endswith(".pyc"):
                found.append(full.relative_to(root).as_posix())
    return sorted(found)


def _step_from_json(raw: object) -> ImageStep:
    if (
        not isinstance(raw, dict)
        or not isinstance(raw.get("kind"), str)
        or not isinstance(raw.get("args"), dict)
    ):
        raise ConfigurationError(
            f"image JSON step {raw!r} must be an object with 'kind' and 'args'"
        )
    kind, args = raw["kind"], raw["args"]
    if kind not in IMAGE_STEP_KINDS:
        raise ConfigurationError(
            f"image JSON step kind {kind!r} is unknown; known: {sorted(IMAGE_STEP_KINDS)}"
        )
    probe = Image.debian_slim()
    try:
        if kind in ("pip_install", "uv_pip_install", "apt_install"):
            return getattr(probe, kind)(args["packages"]).steps[0]  # type: ignore[no-any-return]
        if kind == "run_commands":
            return probe.run_commands(args["commands"]).steps[0]
        if kind == "env":
            return probe.env(args["vars"]).steps[0]
        if kind == "workdir":
            return probe.workdir(args["path"]).steps[0]
        return _local_step_from_json(kind, args)
    except KeyError as exc:
        raise ConfigurationError(
            f"image JSON step {kind!r} lacks the field {exc.args[0]!r}"
        ) from None


def _local_step_from_json(kind: str, args: dict[str, Any]) -> ImageStep:
    local, digest = args["local"], args["sha256"]
    if (
        not isinstance(local, str)
        or not isinstance(digest, str)
        or not re.fullmatch(r"[0-9a-f]{64}", digest)
    ):
        raise ConfigurationError(f"image JSON step {kind!r} has a bad local path or sha256")
    fields: dict[str, Any] = {
        "local": local,
        "remote": _remote_path(kind, args["remote"]),
        "sha256": digest,
    }
    if kind == "add_local_dir":
        files = args["files"]
        if not isinstance(files, list) or not all(
            isinstance(f, list) and len(f) == 2 and all(isinstance(x, str) for x in f)
            for f in files
        ):
            raise ConfigurationError("image JSON step 'add_local_dir' has a bad 'files' list")
        fields["files"] = tuple((rel, sha) for rel, sha in files)
    return ImageStep(kind, MappingProxyType(fields))
