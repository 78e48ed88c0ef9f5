"""The worker image of a group: its effective :class:`Image`, its Dockerfile and build context.

The image a group runs is the revision's image (or a Debian slim one with the
script's ``# /// script`` dependencies), plus keepgoing, plus the source file,
ending in ``keepgoing worker`` on the group's queue. Its tag is the SHA-256 of
the Dockerfile and of the source: every local file enters the Dockerfile by
its digest, so an unchanged image keeps its tag and any change makes a new one.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
import shutil
import sys
from collections.abc import Callable
from pathlib import Path, PurePosixPath

from keepgoing._groups.image import Image, ImageStep
from keepgoing._groups.kubernetes.settings import KubernetesSettings
from keepgoing._groups.spec import GroupRevision
from keepgoing.errors import GroupError

__all__ = ["APP_DIR", "image_reference", "render_dockerfile", "worker_image", "write_context"]

APP_DIR = "/app"
WORKER_UID = 10001
_SOURCE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*\.py")
_REQ_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def worker_image(revision: GroupRevision, settings: KubernetesSettings) -> Image:
    """The image spec a group's workers run (before the source file is added).

    A group without an image gets Debian slim with this interpreter's Python and the
    script's dependencies; a per-task group gets its image plus those dependencies
    (the seed's rule: task images also receive the shared dependencies); a main group
    with its own image installs them itself. Every image gets keepgoing.
    """
    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    image = revision.image or Image.debian_slim(here)
    deps = revision.dependencies if (revision.image is None or revision.parent) else ()
    wanted = [d for d in deps if not _installs(image, d)]
    if not any(_name(d) == "keepgoing" for d in wanted) and not _installs_keepgoing(image):
        wanted.append(settings.keepgoing_requirement)
    return image.pip_install(wanted) if wanted else image


def source_name(revision: GroupRevision) -> str:
    name = PurePosixPath(revision.filename.replace("\\", "/")).name
    if not _SOURCE_NAME.fullmatch(name):
        raise GroupError(
            f"source file name {revision.filename!r} cannot name a file in the image: "
            "use letters, digits, '_', '-' and '.', ending in .py"
        )
    return name


def worker_command(revision: GroupRevision, settings: KubernetesSettings) -> list[str]:
    """The container's command: ``keepgoing worker`` on the group's queue (store from env)."""
    return [
        "keepgoing",
        "worker",
        f"{APP_DIR}/{source_name(revision)}",
        "--queue",
        revision.task_queue,
        "--concurrency",
        str(revision.concurrency),
        "--shutdown-grace",
        _number(settings.shutdown_grace),
    ]


def render_dockerfile(revision: GroupRevision, settings: KubernetesSettings) -> str:
    """The Dockerfile of the group's worker image (build context: :func:`write_context`)."""
    image = worker_image(revision, settings)
    lines = [
        # No revision number here: a redeploy with the same content reuses the image.
        f"# keepgoing worker image for group {revision.group}",
        f"# image spec {image.hash}",
        f"FROM python:{image.python_version}-slim",
        "ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1",
    ]
    has_uv = False
    workdir = None
    for step in image.steps:
        if step.kind == "uv_pip_install" and not has_uv:
            lines.append("RUN python -m pip install uv")
            has_uv = True
        if step.kind == "workdir":
            workdir = step.args["path"]
        lines.extend(_STEP_LINES[step.kind](step))
    name = source_name(revision)
    lines += [
        f"RUN useradd --create-home --uid {WORKER_UID} keepgoing",
        _copy(f"source/{name}", f"{APP_DIR}/{name}"),
        *([] if workdir else [f"WORKDIR {APP_DIR}"]),
        f"USER {WORKER_UID}",
        "ENTRYPOINT " + json.dumps(worker_command(revision, settings)),
    ]
    return "\n".join(lines) + "\n"


def image_reference(revision: GroupRevision, settings: KubernetesSettings) -> str:
    """``<repository>/<group>:<tag>``, the tag a hash of everything the build reads."""
    digest = hashlib.sha256()
    digest.update(render_dockerfile(revision, settings).encode())
    digest.update(b"\0")
    digest.update(revision.source.encode())
    return f"{settings.image_repository}/{revision.group}:{digest.hexdigest()[:16]}"


def write_context(revision: GroupRevision, settings: KubernetesSettings, folder: Path) -> Path:
    """Write the Dockerfile and everything it copies into ``folder``; returns the Dockerfile.

    Raises:
        GroupError: a local file or directory of the image changed (or went away)
            since the image was defined: its hash would no longer say what is built.
    """
    image = worker_image(revision, settings)
    if folder.exists():
        shutil.rmtree(folder)
    (folder / "source").mkdir(parents=True)
    (folder / "source" / source_name(revision)).write_text(revision.source, "utf-8")
    for step in image.steps:
        if step.kind == "add_local_file":
            _copy_file(step, folder / "files" / step.args["sha256"])
        elif step.kind == "add_local_dir":
            _copy_dir(step, folder / "dirs" / step.args["sha256"])
    dockerfile = folder / "Dockerfile"
    dockerfile.write_text(render_dockerfile(revision, settings), "utf-8")
    return dockerfile


# -- steps -------------------------------------------------------------------------
def _pip(step: ImageStep) -> list[str]:
    return ["RUN python -m pip install " + _quoted(step.args["packages"])]


def _uv(step: ImageStep) -> list[str]:
    return ["RUN uv pip install --system " + _quoted(step.args["packages"])]


def _apt(step: ImageStep) -> list[str]:
    pkgs = " ".join(step.args["packages"])
    return [
        "RUN apt-get update && apt-get install -y --no-install-recommends "
        f"{pkgs} && rm -rf /var/lib/apt/lists/*"
    ]


def _run(step: ImageStep) -> list[str]:
    return [f"RUN {cmd}" for cmd in step.args["commands"]]


def _env(step: ImageStep) -> list[str]:
    pairs = " ".join(f'{k}="{_env_value(v)}"' for k, v in step.args["vars"].items())
    return [f"ENV {pairs}"]


def _file(step: ImageStep) -> list[str]:
    return [_copy(f"files/{step.args['sha256']}", step.args["remote"])]


def _dir(step: ImageStep) -> list[str]:
    return [_copy(f"dirs/{step.args['sha256']}/", step.args["remote"].rstrip("/") + "/")]


def _workdir(step: ImageStep) -> list[str]:
    return [f"WORKDIR {step.args['path']}"]


_STEP_LINES: dict[str, Callable[[ImageStep], list[str]]] = {
    "pip_install": _pip,
    "uv_pip_install": _uv,
    "apt_install": _apt,
    "run_commands": _run,
    "env": _env,
    "add_local_file": _file,
    "add_local_dir": _dir,
    "workdir": _workdir,
}


def _copy(src: str, dest: str) -> str:
    return "COPY " + json.dumps([src, dest])


def _quoted(items: tuple[str, ...]) -> str:
    return " ".join(shlex.quote(item) for item in items)


def _env_value(value: str) -> str:
    # Inside Dockerfile double quotes a backslash escapes, and $ expands a variable.
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$")


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _name(requirement: str) -> str:
    match = _REQ_NAME.match(requirement.strip())
    return re.sub(r"[-_.]+", "-", match.group(0)).lower() if match else ""


def _installs(image: Image, requirement: str) -> bool:
    wanted = _name(requirement)
    return any(
        _name(pkg) == wanted
        for step in image.steps
        if step.kind in ("pip_install", "uv_pip_install")
        for pkg in step.args["packages"]
    )


def _installs_keepgoing(image: Image) -> bool:
    return _installs(image, "keepgoing")


def _copy_file(step: ImageStep, dest: Path) -> None:
    local = Path(step.args["local"])
    data = _read(local)
    if hashlib.sha256(data).hexdigest() != step.args["sha256"]:
        raise GroupError(
            f"add_local_file: {local} changed since the image was defined; define it again"
        )
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_bytes(data)


def _copy_dir(step: ImageStep, dest: Path) -> None:
    local = Path(step.args["local"])
    for rel, sha in step.args["files"]:
        data = _read(local / rel)
        if hashlib.sha256(data).hexdigest() != sha:
            raise GroupError(
                f"add_local_dir: {local / rel} changed since the image was defined; define it again"
            )
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise GroupError(f"cannot read {path} for the image: {exc.strerror}") from None
