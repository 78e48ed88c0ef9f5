"""The Python an image asks for, on the local backend: found by uv, never substituted.

``Image.debian_slim("3.12")`` asks for CPython 3.12. The local backend builds that
image's environment with the interpreter ``uv python find 3.12`` names on this
machine (uv is never let download one), and refuses the deploy when uv finds none,
naming the versions it did find. A request for this process's own version is the
interpreter running here. ``"3.12"`` is any 3.12; ``"3.12.4"`` exactly that one.

An environment on another version cannot share this environment's packages (their
compiled parts are built for this interpreter), so it gets its own: keepgoing's
runtime requirements (and the optional ones installed here, such as the PostgreSQL
driver) installed by uv for that interpreter, and keepgoing itself, a pure-Python
package, linked from this installation (:func:`link_keepgoing`).
"""

from __future__ import annotations

import functools
import importlib.metadata
import json
import os
import re
import subprocess
import sys
from pathlib import Path

from keepgoing.errors import GroupError

__all__ = [
    "find_python",
    "link_keepgoing",
    "python_versions",
    "runtime_requirements",
    "this_python",
]

_EXTRA = re.compile(r"""extra\s*==\s*['"]([^'"]+)['"]""")
#: The extras a replica may need (its store's driver, its traces), when installed here.
_REPLICA_EXTRAS = frozenset({"postgres", "otel"})
_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def this_python() -> str:
    """This interpreter's version, ``major.minor.micro``."""
    return ".".join(str(n) for n in sys.version_info[:3])


def _satisfies(found: str, wanted: str) -> bool:
    return found == wanted or found.startswith(wanted + ".")


def _uv(*args: str) -> subprocess.CompletedProcess[str]:
    from uv import find_uv_bin  # noqa: PLC0415 (only when an image asks for a version)

    env = {**os.environ, "UV_PYTHON_DOWNLOADS": "never", "NO_COLOR": "1"}
    return subprocess.run(
        [find_uv_bin(), *args], capture_output=True, text=True, env=env, timeout=60, check=False
    )


def python_versions() -> list[str]:
    """The CPython versions uv finds on this machine (``major.minor.micro``), newest first."""
    done = _uv("python", "list", "--only-installed", "--output-format", "json")
    found = {this_python()}
    if done.returncode == 0:
        try:
            for entry in json.loads(done.stdout or "[]"):
                if entry.get("implementation", "cpython") == "cpython" and entry.get("version"):
                    found.add(str(entry["version"]))
        except (ValueError, AttributeError, TypeError):
            pass
    return sorted(
        found, key=lambda v: [int(p) if p.isdigit() else 0 for p in v.split(".")], reverse=True
    )


@functools.lru_cache(maxsize=32)
def _find(version: str, path: str) -> str | None:
    del path  # part of the cache key: another PATH may hold other interpreters
    done = _uv("python", "find", version)
    if done.returncode != 0:
        return None
    found = done.stdout.strip().splitlines()
    return found[-1] if found else None


def find_python(version: str) -> str:
    """The interpreter for Python ``version`` on this machine.

    Raises:
        GroupError: uv finds none; the message names the versions it found.
    """
    if _satisfies(this_python(), version):
        return sys.executable
    found = _find(version, os.environ.get("PATH", ""))
    if found is not None:
        return found
    versions = python_versions()
    raise GroupError(
        f"the image asks for Python {version}, and uv finds no such interpreter on this "
        f"machine (it finds {', '.join(versions)}); install it (uv python install {version}), "
        "put it on PATH, or ask for one of those: the local backend never substitutes another"
    )


def runtime_requirements() -> list[str]:
    """keepgoing's own requirements, plus those of its extras installed here."""
    wanted = []
    for requirement in importlib.metadata.requires("keepgoing") or []:
        spec, _, marker = requirement.partition(";")
        extra = _EXTRA.search(marker)
        if extra is not None and (extra.group(1) not in _REPLICA_EXTRAS or not _installed(spec)):
            continue
        wanted.append(spec.strip())
    return wanted


def _installed(spec: str) -> bool:
    match = _NAME.match(spec)
    if match is None:
        return False
    try:
        importlib.metadata.distribution(match.group(1))
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def link_keepgoing(site_packages: Path, folder: Path) -> None:
    """Make this installation's keepgoing importable in another environment: a ``.pth``
    file there names ``folder``, which holds a link to the package."""
    package = Path(__file__).resolve().parents[1]  # keepgoing/ (this is keepgoing/_groups/)
    folder.mkdir(parents=True, exist_ok=True)
    link = folder / "keepgoing"
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(package, target_is_directory=True)
    site_packages.mkdir(parents=True, exist_ok=True)
    (site_packages / "_keepgoing_source.pth").write_text(f"{folder}\n")
