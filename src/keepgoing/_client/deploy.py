"""``deploy_workflow_worker``: a source file becomes a scale-to-zero worker group.

The deploy stores the file and its PEP 723 dependencies as a new revision of
the group ``name`` (queue ``workflows.<name>``), plus one group per distinct
task image (``<name>-<hash8>``, queue ``workflows.<name>-<hash8>``), and
starts no run. The autoscaler of the store (in every ``keepgoing server``,
``keepgoing dev`` and ``keepgoing groups serve``) then runs replicas while
there is work. In store mode with none of those running, the deploy starts a
background orchestrator for the store (:mod:`keepgoing._client.orchestrator`).
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from keepgoing._client import orchestrator as background
from keepgoing._client.client import Client
from keepgoing._client.schedules import declared_in_file
from keepgoing._groups.envs import build_env, check_local_image
from keepgoing._groups.image import Image
from keepgoing._groups.registration import (
    MAX_SOURCE,
    UPGRADES,
    DeployPlan,
    check_settings,
    secret_refs,
)
from keepgoing._groups.replaycheck import DEFAULT_PER_NAME, DEFAULT_TIME_LIMIT, ReplayReport
from keepgoing._groups.secrets import Secret
from keepgoing._groups.spec import (
    GroupRevision,
    check_env_name,
    check_group_name,
    default_group_name,
    group_queue,
    parse_cpu,
    parse_memory,
    script_dependencies,
)
from keepgoing._groups.upgrade import DeployOptions
from keepgoing._store.protocol import Store
from keepgoing._workflow.registry import registry
from keepgoing._workflow.workflow import WorkflowDefinition
from keepgoing.errors import GroupError

__all__ = ["WorkflowWorker", "build_plan", "deploy_workflow_worker"]

log = logging.getLogger("keepgoing.groups")


@dataclass(frozen=True)
class WorkflowWorker:
    """A deployed worker: its main group, its queue, and the group of each image task.

    ``revision`` is the main group's new revision number. ``replay`` is the replay
    check of the runs the deploy would move (None: it moved none), ``moved`` the
    runs now on the new revision, ``pinned`` the runs that stayed, with why.
    """

    scaling_group: str
    task_queue: str
    task_workers: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    revision: int = 1
    client: Client | None = field(default=None, repr=False, compare=False)
    replay: ReplayReport | None = field(default=None, compare=False)
    moved: tuple[str, ...] = ()
    pinned: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    def trigger(
        self,
        workflow_or_name: WorkflowDefinition[..., Any] | str,
        input: Any = None,
        *,
        workflow_id: str | None = None,
        wait: bool = False,
        timeout: float | None = None,
    ) -> Any:
        """Start a run on this worker's queue (see :meth:`Client.trigger_workflow`)."""
        client = self.client or Client()
        return client.trigger_workflow(
            workflow_or_name,
            input,
            workflow_id=workflow_id,
            task_queue=self.task_queue,
            wait=wait,
            timeout=timeout,
        )


def _running_script() -> str:
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if not path or not str(path).endswith(".py"):
        raise GroupError("pass source=...: this process is not running a .py script")
    return str(path)


def _image_tasks(path: Path, text: str) -> dict[str, Image]:
    """The tasks with an image that ``path`` defines (imported if it was not already)."""

    def defined_here() -> dict[str, object]:
        found = {}
        for name, definition in registry.tasks.items():
            code = getattr(definition.fn, "__code__", None)
            if code is not None and os.path.abspath(code.co_filename) == str(path):
                found[name] = definition.image
        return found

    here = defined_here()
    if not here and "image" in text:
        return _image_tasks_elsewhere(path)
    images: dict[str, Image] = {}
    for name, image in here.items():
        if image is None:
            continue
        if not isinstance(image, Image):
            raise GroupError(
                f"task {name!r} has image={image!r}; use keepgoing.Image.debian_slim(...)"
            )
        images[name] = image
    return images


_LIST_IMAGES = """
import json, sys
from keepgoing._worker.loader import load_file
from keepgoing._workflow.registry import registry
load_file(sys.argv[1])
print(json.dumps({n: t.image.canonical_json() for n, t in registry.tasks.items()
                  if getattr(t.image, "canonical_json", None)}))
"""


def _image_tasks_elsewhere(path: Path) -> dict[str, Image]:
    """Import ``path`` in a child process (never this one: its names would stay
    registered here) and read the images of its tasks."""
    done = subprocess.run(
        [sys.executable, "-c", _LIST_IMAGES, str(path)],
        capture_output=True,
        text=True,
        cwd=path.parent,
        check=False,
    )
    if done.returncode != 0:
        detail = done.stderr.strip().splitlines()[-1:] or ["no output"]
        raise GroupError(f"importing {path.name} to find its task images failed: {detail[0]}")
    found = json.loads(done.stdout.strip().splitlines()[-1])
    return {name: Image.from_json(text) for name, text in found.items()}


def _secret_entries(
    env: Mapping[str, object] | None, secrets: Iterable[Secret] | None
) -> tuple[dict[str, str], dict[str, tuple[str, bool]], dict[str, str]]:
    """(plain env, env var -> (secret name, uploaded), uploads)."""
    if env is not None and not isinstance(env, Mapping):
        raise GroupError(f"env must be a mapping of names to strings or Secrets, not {env!r}")
    plain: dict[str, str] = {}
    refs: dict[str, tuple[str, bool]] = {}
    uploads: dict[str, str] = {}

    def add(var: str, secret: Secret) -> None:
        if var in refs or var in plain:
            raise GroupError(f"{var} is set twice")
        refs[var] = (secret.name, secret.local)
        if secret.value is not None:
            uploads[secret.name] = secret.value

    for key, value in (env or {}).items():
        check_env_name(key)
        if isinstance(value, Secret):
            if value.env_var is not None and value.env_var != key:
                raise GroupError(f"env[{key!r}] is a Secret injected as {value.env_var}; pick one")
            add(key, value)
        elif isinstance(value, str):
            plain[key] = value
        else:
            raise GroupError(
                f"env[{key!r}] must be a string or a Secret, not {type(value).__name__}"
            )
    if secrets is not None and (
        isinstance(secrets, str | Secret) or not isinstance(secrets, Iterable)
    ):
        raise GroupError("secrets must be a list of Secret")
    for secret in secrets or ():
        if not isinstance(secret, Secret):
            raise GroupError(f"secrets must hold Secret objects, not {type(secret).__name__}")
        add(secret.env_var or secret.name, secret)
    return plain, refs, uploads


def build_plan(
    source: str | os.PathLike[str] | None = None,
    *,
    name: str | None = None,
    image: Image | None = None,
    cpu: str | int | float | None = None,
    memory: str | None = None,
    env: Mapping[str, str | Secret] | None = None,
    secrets: Iterable[Secret] | None = None,
    max_replicas: int = 1,
    shutdown_delay_seconds: float | None = None,
    keep_warm_while_open: bool = False,
    concurrency: int = 16,
    backend: str = "local",
    upgrade: str = "pinned",
) -> DeployPlan:
    """The groups a deploy of ``source`` makes (see :func:`deploy_workflow_worker`)."""
    if upgrade not in UPGRADES:
        raise GroupError(f"upgrade must be one of {', '.join(UPGRADES)}, not {upgrade!r}")
    path = Path(os.path.abspath(source if source is not None else _running_script()))
    if not path.is_file() or path.suffix != ".py":
        raise GroupError(f"{source or path} is not a Python file")
    if path.stat().st_size > MAX_SOURCE:
        raise GroupError(f"{path.name} is larger than {MAX_SOURCE} bytes")
    text = path.read_text(encoding="utf-8")
    group = default_group_name(path.name) if name is None else check_group_name(name)
    if image is not None and not isinstance(image, Image):
        raise GroupError(f"image must be a keepgoing.Image, not {type(image).__name__}")
    if not isinstance(keep_warm_while_open, bool):
        raise GroupError("keep_warm_while_open must be True or False")
    replicas, delay, slots = check_settings(
        max_replicas=max_replicas,
        shutdown_delay_seconds=shutdown_delay_seconds,
        concurrency=concurrency,
    )
    plain, refs, uploads = _secret_entries(env, secrets)
    common: dict[str, Any] = {
        "source": text,
        "filename": path.name,
        "dependencies": script_dependencies(text, path.name),
        "cpu": parse_cpu(cpu),
        "memory": parse_memory(memory),
        "env": MappingProxyType(plain),
        "secrets": secret_refs(group, refs),
        "max_replicas": replicas,
        "shutdown_delay_seconds": delay,
        "keep_warm_while_open": keep_warm_while_open,
        "concurrency": slots,
        "revision": 0,
        "upgrade": upgrade,
    }
    by_image: dict[str, tuple[Image, list[str]]] = {}
    for task, task_image in sorted(_image_tasks(path, text).items()):
        by_image.setdefault(task_image.hash, (task_image, []))[1].append(task)
    task_groups = []
    routes: dict[str, str] = {}
    for digest, (task_image, tasks) in sorted(by_image.items()):
        sub = f"{group}-{digest[:8]}"
        task_groups.append(
            GroupRevision(
                group=sub,
                task_queue=group_queue(sub),
                image=task_image,
                parent=group,
                tasks=tuple(tasks),
                **common,
            )
        )
        routes.update({task: group_queue(sub) for task in tasks})
    main = GroupRevision(
        group=group,
        task_queue=group_queue(group),
        image=image,
        task_queues=MappingProxyType(routes),
        **common,
    )
    plan = DeployPlan(
        main=main,
        task_groups=tuple(task_groups),
        uploads=MappingProxyType(uploads),
        backend=backend,
    ).check()
    if backend == "local":
        for revision in plan.groups:
            if revision.image is not None:
                check_local_image(revision.image)
    return plan


def deploy_workflow_worker(
    source: str | os.PathLike[str] | None = None,
    *,
    name: str | None = None,
    image: Image | None = None,
    cpu: str | int | float | None = None,
    memory: str | None = None,
    env: Mapping[str, str | Secret] | None = None,
    secrets: Iterable[Secret] | None = None,
    max_replicas: int = 1,
    shutdown_delay_seconds: float | None = None,
    keep_warm_while_open: bool = False,
    concurrency: int = 16,
    client: Client | None = None,
    store: str | Store | None = None,
    build: bool = True,
    upgrade: str = "pinned",
    migrate: Iterable[str] = (),
    force: bool = False,
    check_per_name: int = DEFAULT_PER_NAME,
    check_time_limit: float = DEFAULT_TIME_LIMIT,
) -> WorkflowWorker:
    """Register or update the scale-to-zero worker group ``name`` for ``source``.

    Args:
        source: the workflow file (default: the running script).
        name: the group (default ``wf-<file stem>``): a DNS label of at most 40 characters.
        image: the main worker's image (default: the script's ``# /// script``
            dependencies on this environment).
        cpu: cores per replica (``"2"``, ``"500m"``); memory: ``"512Mi"``, ``"4Gi"``.
        env: variables for every replica; a :class:`Secret` value is injected
            decrypted, and only into the workers.
        secrets: more secrets, each under its own name (or alias).
        max_replicas: the most replicas the autoscaler runs per group.
        shutdown_delay_seconds: idle seconds before a group goes back to 0 (default 60).
        keep_warm_while_open: count runs that wait (on a timer, message, event or
            child) as work, as if they held a worker. Off: a waiting run holds none.
        concurrency: task attempts per replica (the autoscaler adds a replica per
            this many queued or running attempts, up to ``max_replicas``).
        client: where to deploy (default: ``KEEPGOING_URL``'s server, else ``store``).
        store: a store URL or store, in store mode.
        build: in store mode, build the groups' environments now, showing progress
            (otherwise the autoscaler builds them at the first wake-up).
        upgrade: ``"pinned"`` (default): runs in flight stay on the revision they
            started on, served by its own workers until they end. ``"auto"``: this
            deploy moves them to the new revision, once their histories replay on it.
        migrate: workflow ids or run ids of open runs to move to the new revision too.
        force: deploy even if runs to move would block on the new code; those stay
            on their revisions.
        check_per_name, check_time_limit: the replay check's bound: at most this
            many runs per workflow name, newest first, within this many seconds.
            Runs not checked stay on their revisions.

    Deploying starts no run. Redeploying adds a revision: runs record the revision
    they started on and stay on it (a revision is retired once its last run ends);
    new runs start on the new one.

    Raises:
        DeployRefusedError: a run to move would block on the new code (its diff is in
            ``.report``); nothing was deployed.
        GroupError: a bad name, setting, image step or secret (the message names it).
    """
    plan = build_plan(
        source,
        name=name,
        image=image,
        cpu=cpu,
        memory=memory,
        env=env,
        secrets=secrets,
        max_replicas=max_replicas,
        shutdown_delay_seconds=shutdown_delay_seconds,
        keep_warm_while_open=keep_warm_while_open,
        concurrency=concurrency,
        upgrade=upgrade,
    )
    if isinstance(migrate, str):
        raise GroupError("migrate must be a list of run or workflow ids, not one string")
    options = DeployOptions(
        force=force,
        migrate=tuple(migrate),
        check_per_name=check_per_name,
        check_time_limit=check_time_limit,
        import_path=(str(Path(os.path.abspath(source or _running_script())).parent),),
    )
    DeployOptions.from_body(options.to_body())  # the same checks as the server's
    client = client or (Client(store=store) if store is not None else Client())
    groups = client.groups
    local_store = groups.autoscaler_running() is not None
    if build and local_store:
        for revision in plan.groups:
            build_env(revision.image, revision.dependencies, progress=_progress(revision.group))
    outcome = groups.deploy(plan, options)
    revisions = outcome.revisions
    declared = declared_in_file(Path(os.path.abspath(source or _running_script())))
    for change in (
        client._sync_declared(declared, plan.main.task_queue) if declared is not None else ()
    ):
        log.info("%s", change)
    if local_store and not groups.autoscaler_running():
        _orchestrate(client.store)
    return WorkflowWorker(
        scaling_group=plan.main.group,
        task_queue=plan.main.task_queue,
        task_workers=MappingProxyType(plan.task_workers),
        revision=revisions[plan.main.group],
        client=client,
        replay=outcome.report,
        moved=outcome.moved,
        pinned=MappingProxyType(dict(outcome.pinned)),
    )


def _orchestrate(store: Store) -> None:
    """Nothing scales this store's groups: start its background orchestrator (or warn,
    with ``KEEPGOING_ORCHESTRATOR=off``)."""
    url = background.shareable_url(store)
    if url is None:
        return  # a store in memory: no replica could reach it
    if not background.enabled():
        log.warning(
            "no autoscaler is running for this store and KEEPGOING_ORCHESTRATOR is off: "
            "start `keepgoing groups serve` (or `keepgoing server` / `keepgoing dev`) so "
            "the group's workers start"
        )
        return
    found = background.ensure_orchestrator(url)
    if found.started_now:
        print(
            f"started a background orchestrator (pid {found.pid}) for this store: it starts "
            f"the group's workers when a run is queued and fires its timers, and stops after "
            f"{found.idle_seconds or background.DEFAULT_IDLE:g}s with no work; log {found.log}; "
            "`keepgoing orchestrator stop` ends it",
            file=sys.stderr,
        )


def _progress(group: str) -> Callable[[str], None]:
    def show(line: str) -> None:
        print(f"[{group}] {line}", file=sys.stderr)

    return show
