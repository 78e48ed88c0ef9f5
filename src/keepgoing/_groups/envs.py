"""Python environments for the local backend: one virtual environment per image, built with uv.

An environment is keyed by a hash of what goes into it (the image's hash, the
script's shared dependencies that are missing here, this interpreter), built
once under ``$XDG_CACHE_HOME/keepgoing/envs/<key>`` (``~/.cache/...``), and
reused by every group and process that asks for the same key; uv's own cache
shares package files between environments. A lock file makes concurrent
builders of one key take turns, and a marker file written last means a build
that was interrupted is built again.

An image on this interpreter's Python version is layered over the environment
keepgoing runs in: a ``.pth`` file adds this environment's site directories
*after* the new environment's own, so keepgoing and its dependencies import as
they do here, while packages the image installs take precedence and are visible
only in that environment. An image on another version gets that interpreter, as
uv finds it on this machine (:mod:`keepgoing._groups.pythons`), and an
environment of its own: keepgoing's requirements installed for it, keepgoing
linked in. A version uv does not find refuses the deploy.

No image and no missing dependency is the fast path: the current interpreter,
nothing built.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.metadata
import json
import os
import re
import shutil
import site
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from keepgoing._groups.pythons import find_python, link_keepgoing, runtime_requirements
from keepgoing.errors import GroupError

if TYPE_CHECKING:
    from keepgoing._groups.image import Image

__all__ = ["BuiltEnv", "build_env", "envs_root", "missing_requirements"]

#: Image steps that mean nothing to a process on this machine, and who builds them.
UNSUPPORTED_LOCALLY = {
    "apt_install": "system packages",
    "run_commands": "shell commands at build time",
}
_REQ_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
_DONE = ".keepgoing-built"

Progress = Callable[[str], None]


@dataclass(frozen=True)
class BuiltEnv:
    """Where a group's workers run: the interpreter, extra variables, the working folder."""

    python: str
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    key: str = ""
    built_seconds: float | None = None  # None: reused (or the fast path)


def envs_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "keepgoing" / "envs"


def _requirement_name(requirement: str) -> str:
    match = _REQ_NAME.match(requirement)
    if not match:
        raise GroupError(f"{requirement!r} is not a package requirement")
    return re.sub(r"[-_.]+", "-", match.group(1)).lower()


def missing_requirements(requirements: Iterable[str]) -> list[str]:
    """The requirements whose distribution is not installed in this environment."""
    missing = []
    for requirement in requirements:
        name = _requirement_name(requirement)
        try:
            importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            missing.append(requirement)
    return missing


def check_local_image(image: Image) -> str:
    """Refuse the steps this backend cannot carry out, naming the step and who can, and
    an image whose Python version this machine lacks; the interpreter it runs on.

    Raises:
        GroupError: an ``apt_install`` or ``run_commands`` step, or a Python version uv
            does not find here (the message names the versions it found).
    """
    for step in image.steps:
        if step.kind in UNSUPPORTED_LOCALLY:
            raise GroupError(
                f"image step {step.kind}({_args_text(step.args)}) installs "
                f"{UNSUPPORTED_LOCALLY[step.kind]}, which the local backend cannot do; "
                "deploy with --backend kubernetes (it builds the image's Dockerfile), or "
                "remove the step"
            )
    return find_python(image.python_version)


def _args_text(args: Mapping[str, object]) -> str:
    values = [v for v in args.values() if v]
    text = ", ".join(repr(list(v)) if isinstance(v, tuple | list) else repr(v) for v in values)
    return text if len(text) < 80 else text[:77] + "..."


def build_env(
    image: Image | None,
    dependencies: Iterable[str],
    *,
    progress: Progress = lambda line: None,
    root: Path | None = None,
) -> BuiltEnv:
    """The environment for ``image`` plus the script's shared ``dependencies``.

    Raises:
        GroupError: an unsupported image step, or uv failed (its output is in the message).
    """
    missing = missing_requirements(dependencies)
    if image is None and not missing:
        return BuiltEnv(python=sys.executable)
    base = check_local_image(image) if image is not None else sys.executable
    layered = base == sys.executable  # else: an interpreter of another version
    packages: list[str] = list(missing) if layered else _own_packages(dependencies)
    env, workdir, files = _image_steps(image, packages)
    key = hashlib.sha256(
        json.dumps(
            {
                "image": image.hash if image is not None else None,
                "missing": sorted(missing if layered else packages),
                "python": base,
                # An environment on another interpreter links this installation's
                # keepgoing in: another installation (another checkout, another
                # version) gets an environment of its own.
                "keepgoing": None if layered else str(Path(__file__).resolve().parents[1]),
            },
            sort_keys=True,
        ).encode()
    ).hexdigest()[:24]
    folder = (root or envs_root()) / key
    files_root = folder / "root"
    cwd = str(files_root / PurePosixPath(workdir).relative_to("/")) if workdir else None
    env["KEEPGOING_IMAGE_ROOT"] = str(files_root)
    python = str(folder / "venv" / "bin" / "python")
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (folder / _DONE).exists():
            return BuiltEnv(python=python, env=env, cwd=cwd, key=key)
        started = time.monotonic()
        shutil.rmtree(folder, ignore_errors=True)
        where = "" if layered else f" on {base}"
        progress(f"building environment {key}{where}: {len(packages)} package(s)")
        _uv(["venv", "--quiet", "--python", base, str(folder / "venv")], progress)
        if layered:
            _layer_over_this_environment(folder / "venv")
        else:
            link_keepgoing(_site_packages(python), folder / "keepgoing-source")
        if packages:
            _uv(["pip", "install", "--python", python, *sorted(set(packages))], progress)
        for kind, local, remote in files:
            target = files_root / PurePosixPath(remote).relative_to("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            if kind == "add_local_dir":
                shutil.copytree(local, target, dirs_exist_ok=True)
            else:
                shutil.copy2(local, target)
        if cwd:
            Path(cwd).mkdir(parents=True, exist_ok=True)
        (folder / _DONE).write_text(json.dumps({"packages": sorted(set(packages))}))
        seconds = time.monotonic() - started
        progress(f"built environment {key} in {seconds:.1f}s")
        return BuiltEnv(python=python, env=env, cwd=cwd, key=key, built_seconds=seconds)


def _image_steps(
    image: Image | None, packages: list[str]
) -> tuple[dict[str, str], str | None, list[tuple[str, str, str]]]:
    """The image's variables, working folder and files ((kind, local, remote)); its
    packages are added to ``packages``."""
    env: dict[str, str] = {}
    workdir: str | None = None
    files: list[tuple[str, str, str]] = []
    for step in image.steps if image is not None else ():
        args = dict(step.args)
        if step.kind in ("pip_install", "uv_pip_install"):
            packages.extend(str(p) for p in args.get("packages", ()))
        elif step.kind == "env":
            env.update({str(k): str(v) for k, v in dict(args.get("vars", {})).items()})
        elif step.kind == "workdir":
            workdir = str(args.get("path"))
        elif step.kind in ("add_local_file", "add_local_dir"):
            files.append((step.kind, str(args.get("local")), str(args.get("remote"))))
    return env, workdir, files


def _own_packages(dependencies: Iterable[str]) -> list[str]:
    """What an environment on another interpreter installs for itself: keepgoing's own
    requirements and the script's (keepgoing itself is linked, not installed)."""
    script = [d for d in dependencies if _requirement_name(d) != "keepgoing"]
    return [*runtime_requirements(), *script]


def _site_packages(python: str) -> Path:
    done = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if done.returncode != 0:
        raise GroupError(f"{python} did not start: {done.stderr.strip()[-500:]}")
    return Path(done.stdout.strip())


def _this_python() -> str:
    return f"{sys.version_info.major}.{sys.version_info.minor}"


def _layer_over_this_environment(venv: Path) -> None:
    lib = venv / "lib" / f"python{_this_python()}" / "site-packages"
    lib.mkdir(parents=True, exist_ok=True)
    dirs = [d for d in (*site.getsitepackages(), site.getusersitepackages()) if Path(d).is_dir()]
    lines = "".join(f"import site; site.addsitedir({d!r})\n" for d in dirs)
    (lib / "_keepgoing_base.pth").write_text(lines)


def _uv(args: list[str], progress: Progress) -> None:
    from uv import find_uv_bin  # noqa: PLC0415 (only when building)

    command = [find_uv_bin(), *args]
    env = {**os.environ, "NO_COLOR": "1"}
    output = []
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
    ) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            output.append(line.rstrip())
            progress(line.rstrip())
    if proc.returncode != 0:
        tail = "\n".join(output[-15:])
        raise GroupError(f"uv {' '.join(args[:2])} failed ({proc.returncode}):\n{tail}")
