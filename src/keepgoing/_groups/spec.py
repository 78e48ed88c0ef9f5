"""What a worker group is: its revision (the deployed spec), its instances, its names.

A :class:`GroupRevision` is immutable and stored as JSON (``to_json`` /
``from_json``) with the group's revision number. It names its secrets by the
environment variable they are injected as, never by value.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from keepgoing.errors import GroupError

if TYPE_CHECKING:
    from keepgoing._groups.image import Image

__all__ = [
    "MAX_NAME",
    "GroupRevision",
    "Instance",
    "SecretRef",
    "check_group_name",
    "default_group_name",
    "group_queue",
    "script_dependencies",
]

#: Group names are DNS labels (they name Kubernetes objects) of at most this length,
#: leaving room for the ``-<hash8>`` of per-task groups and for suffixes Kubernetes adds.
MAX_NAME = 40
_LABEL = re.compile(r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_CPU = re.compile(r"^(\d+(\.\d+)?|\d+m)$")
_MEMORY = re.compile(r"^(\d+)(Ki|Mi|Gi|Ti|K|M|G|T)?$")
_MEMORY_UNITS = {
    None: 1,
    "K": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
}
#: Environment variables a group's ``env`` may not set: keepgoing sets them itself.
RESERVED_ENV = frozenset(
    {
        "KEEPGOING_STORE",
        "KEEPGOING_URL",
        "KEEPGOING_TOKEN",
        "KEEPGOING_GROUP",
        "KEEPGOING_SECRET_ENV",
        "KEEPGOING_SECRET_KEY",
        "KEEPGOING_TASK_QUEUES",
        "KEEPGOING_INSTANCE",
        "KEEPGOING_GROUP_REVISION",
        "KEEPGOING_WORKER_NONCE",
        "KEEPGOING_SUPERVISOR_PID",
    }
)
_SCRIPT = re.compile(r"(?m)^# /// (?P<type>[a-zA-Z0-9-]+)$\s(?P<content>(^#(| .*)$\s)+)^# ///$")


def check_group_name(name: object) -> str:
    """``name`` if it is a DNS label of at most :data:`MAX_NAME` characters.

    Raises:
        GroupError: naming the rule the name breaks.
    """
    if not isinstance(name, str) or not name:
        raise GroupError(f"a group name must be a non-empty string, not {name!r}")
    if len(name) > MAX_NAME:
        raise GroupError(
            f"group name {name!r} is {len(name)} characters long; the limit is {MAX_NAME}"
        )
    if not _LABEL.match(name):
        raise GroupError(
            f"group name {name!r} is not a DNS label: use lowercase letters, digits and '-', "
            "starting and ending with a letter or digit"
        )
    return name


def default_group_name(filename: str) -> str:
    """``wf-<file stem>``, lowercased, with other characters as '-' (``wf-pipeline``)."""
    stem = filename.replace("\\", "/").rsplit("/", 1)[-1]
    stem = stem[:-3] if stem.endswith(".py") else stem
    label = re.sub(r"[^a-z0-9]+", "-", stem.lower()).strip("-")
    return check_group_name(f"wf-{label}"[:MAX_NAME].rstrip("-"))


def group_queue(name: str) -> str:
    """The task queue a group serves: ``workflows.<name>``."""
    return f"workflows.{name}"


def script_dependencies(source: str, filename: str = "<source>") -> tuple[str, ...]:
    """The ``dependencies`` of a PEP 723 ``# /// script`` block (empty without one).

    Raises:
        GroupError: two script blocks, malformed TOML, or dependencies that are not strings.
    """
    blocks = [m for m in _SCRIPT.finditer(source) if m.group("type") == "script"]
    if not blocks:
        return ()
    if len(blocks) > 1:
        raise GroupError(f"{filename} has more than one '# /// script' block")
    content = "".join(
        line[2:] if line.startswith("# ") else line[1:]
        for line in blocks[0].group("content").splitlines(keepends=True)
    )
    try:
        meta = tomllib.loads(content)
    except tomllib.TOMLDecodeError as exc:
        raise GroupError(f"the '# /// script' block of {filename} is not TOML: {exc}") from None
    deps = meta.get("dependencies", [])
    if not isinstance(deps, list) or not all(isinstance(d, str) and d.strip() for d in deps):
        raise GroupError(f"the '# /// script' dependencies of {filename} must be a list of strings")
    return tuple(d.strip() for d in deps)


def parse_cpu(cpu: object) -> str | None:
    """A Kubernetes CPU quantity (``"2"``, ``"0.5"``, ``"500m"``) or None."""
    if cpu is None:
        return None
    text = str(cpu) if isinstance(cpu, int | float) and not isinstance(cpu, bool) else cpu
    if not isinstance(text, str) or not _CPU.match(text) or cpu_cores(text) <= 0:
        raise GroupError(f"cpu must be a positive number of cores like '2' or '500m', not {cpu!r}")
    return text


def cpu_cores(cpu: str) -> float:
    return int(cpu[:-1]) / 1000 if cpu.endswith("m") else float(cpu)


def parse_memory(memory: object) -> str | None:
    """A Kubernetes memory quantity (``"4Gi"``, ``"512Mi"``) or None."""
    if memory is None:
        return None
    if not isinstance(memory, str) or not _MEMORY.match(memory) or memory_bytes(memory) <= 0:
        raise GroupError(f"memory must be a size like '512Mi' or '4Gi', not {memory!r}")
    return memory


def memory_bytes(memory: str) -> int:
    match = _MEMORY.match(memory)
    assert match is not None
    return int(match.group(1)) * _MEMORY_UNITS[match.group(2)]


def check_env_name(name: object, what: str = "env") -> str:
    if not isinstance(name, str) or not _ENV_NAME.match(name):
        raise GroupError(f"{what} names must be environment variable names, not {name!r}")
    if name in RESERVED_ENV:
        raise GroupError(f"{what} may not set {name}: keepgoing sets it for its workers")
    return name


@dataclass(frozen=True)
class SecretRef:
    """A secret injected into a group's workers as ``env_var``.

    ``scope`` is ``""`` for a secret kept by name (:meth:`Secret.from_env`) and the
    group's name for a value uploaded from the deploying machine
    (:meth:`Secret.from_local_env`); ``name`` is the secret's name in that scope.
    """

    env_var: str
    scope: str
    name: str


@dataclass(frozen=True)
class GroupRevision:
    """One deployed revision of a group: everything a backend needs but plaintext secrets.

    ``tasks`` are the task names a per-task group serves (empty: the main group,
    which serves the workflows and every task without an image); ``parent`` is the
    main group of a per-task group; ``task_queues`` maps the image tasks the main
    group's workflows call to the queues of their groups.
    """

    group: str
    revision: int
    task_queue: str
    source: str
    filename: str
    dependencies: tuple[str, ...] = ()
    image: Image | None = None
    cpu: str | None = None
    memory: str | None = None
    env: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    secrets: tuple[SecretRef, ...] = ()
    max_replicas: int = 1
    shutdown_delay_seconds: float = 60.0
    keep_warm_while_open: bool = False
    parent: str | None = None
    tasks: tuple[str, ...] = ()
    task_queues: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    concurrency: int = 16
    #: ``"pinned"``: runs started on this revision stay on it until they end or are
    #: migrated; ``"auto"``: the next deploy moves them to its revision (after the
    #: replay check).
    upgrade: str = "pinned"

    @property
    def secret_names(self) -> tuple[str, ...]:
        """The environment variables that carry secrets."""
        return tuple(ref.env_var for ref in self.secrets)

    def with_revision(self, revision: int) -> GroupRevision:
        return replace(self, revision=revision)

    def to_json(self) -> str:
        body: dict[str, Any] = {
            "group": self.group,
            "revision": self.revision,
            "task_queue": self.task_queue,
            "source": self.source,
            "filename": self.filename,
            "dependencies": list(self.dependencies),
            "image": None if self.image is None else json.loads(self.image.canonical_json()),
            "cpu": self.cpu,
            "memory": self.memory,
            "env": dict(self.env),
            "secrets": [[s.env_var, s.scope, s.name] for s in self.secrets],
            "max_replicas": self.max_replicas,
            "shutdown_delay_seconds": self.shutdown_delay_seconds,
            "keep_warm_while_open": self.keep_warm_while_open,
            "parent": self.parent,
            "tasks": list(self.tasks),
            "task_queues": dict(self.task_queues),
            "concurrency": self.concurrency,
        }
        if self.upgrade != "pinned":  # left out by default: older revisions encode as before
            body["upgrade"] = self.upgrade
        return json.dumps(body, sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> GroupRevision:
        from keepgoing._groups.image import Image  # noqa: PLC0415 (only when a revision has one)

        body = json.loads(text)
        image = body.pop("image")
        return cls(
            **{
                **body,
                "dependencies": tuple(body["dependencies"]),
                "image": None if image is None else Image.from_json(json.dumps(image)),
                "env": MappingProxyType(dict(body["env"])),
                "secrets": tuple(SecretRef(*s) for s in body["secrets"]),
                "tasks": tuple(body["tasks"]),
                "task_queues": MappingProxyType(dict(body["task_queues"])),
            }
        )


@dataclass(frozen=True)
class Instance:
    """One replica of a group, as its backend reports it.

    ``state`` is ``"running"`` or ``"exited"``; ``exit_status`` is the process's
    return code (negative: the signal that ended it) once it has exited.
    """

    instance_id: str
    group: str
    revision: int
    state: str
    started_at: float
    pid: int | None = None
    host: str = ""
    ended_at: float | None = None
    exit_status: int | None = None
