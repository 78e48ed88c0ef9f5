"""``keepgoing deploy``, ``keepgoing groups ...`` and ``keepgoing secrets ...``."""

from __future__ import annotations

import asyncio
import datetime
import os
import signal
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from keepgoing._groups.commands import GroupStatus
from keepgoing.cli._app import app, setup_logging
from keepgoing.cli._common import (
    JsonOption,
    StoreOption,
    TokenOption,
    UrlOption,
    add_row,
    announce_store,
    cli_errors,
    console,
    emit_json,
    fail,
    open_client,
)

groups_app = typer.Typer(
    help="Scale-to-zero worker groups: list, show, scale, kill, remove, serve.",
    no_args_is_help=True,
)
app.add_typer(groups_app, name="groups")
secrets_app = typer.Typer(help="Secrets kept (encrypted) for worker groups.", no_args_is_help=True)
app.add_typer(secrets_app, name="secrets")

GroupArg = Annotated[str, typer.Argument(help="The group's name.")]


@app.command()
def deploy(
    file: Annotated[Path, typer.Argument(help="The workflow file to deploy.")],
    name: Annotated[str | None, typer.Option(help="Group name (default wf-<file stem>).")] = None,
    cpu: Annotated[str | None, typer.Option(help="Cores per replica: 2, 0.5, 500m.")] = None,
    memory: Annotated[str | None, typer.Option(help="Memory per replica: 512Mi, 4Gi.")] = None,
    env: Annotated[
        list[str] | None, typer.Option("--env", "-e", help="NAME=VALUE for every replica.")
    ] = None,
    secret: Annotated[
        list[str] | None,
        typer.Option(
            "--secret",
            help="A kept secret NAME (or NAME=ENV_VAR to inject it as ENV_VAR), see "
            "`keepgoing secrets set`.",
        ),
    ] = None,
    local_secret: Annotated[
        list[str] | None,
        typer.Option(
            "--local-secret", help="Upload this environment variable's value as a secret."
        ),
    ] = None,
    max_replicas: Annotated[int, typer.Option(help="Most replicas per group.")] = 1,
    shutdown_delay: Annotated[
        float | None, typer.Option(help="Idle seconds before scaling to zero (default 60).")
    ] = None,
    keep_warm_while_open: Annotated[
        bool, typer.Option(help="Waiting runs hold a replica (off: they hold none).")
    ] = False,
    concurrency: Annotated[int, typer.Option(help="Task attempts per replica.")] = 16,
    backend: Annotated[
        str, typer.Option(help="Where the groups run: local, or kubernetes (with --out).")
    ] = "local",
    out: Annotated[
        Path | None, typer.Option(help="kubernetes: write each group's image and manifests here.")
    ] = None,
    apply: Annotated[
        bool, typer.Option("--apply", help="kubernetes: also apply the manifests to the cluster.")
    ] = False,
    namespace: Annotated[str, typer.Option(help="kubernetes: the namespace.")] = "default",
    image_repository: Annotated[
        str, typer.Option(help="kubernetes: where the worker images are pushed.")
    ] = "keepgoing-workers",
    cluster_store: Annotated[
        str | None,
        typer.Option(help="kubernetes: the store URL as pods reach it (default: the store)."),
    ] = None,
    upgrade: Annotated[
        str,
        typer.Option(help="pinned: runs in flight stay on their revision; auto: move them."),
    ] = "pinned",
    migrate: Annotated[
        list[str] | None,
        typer.Option("--migrate", help="Move this open run (workflow or run id) too."),
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Deploy even if runs would block; they stay.")
    ] = False,
    check_limit: Annotated[
        int, typer.Option(help="Replay check: runs per workflow, newest first.")
    ] = 20,
    check_time_limit: Annotated[float, typer.Option(help="Replay check: seconds.")] = 60.0,
    url: UrlOption = None,
    token: TokenOption = None,
    store: StoreOption = None,
) -> None:
    """Deploy FILE as a scale-to-zero worker group; starts no run.

    Runs in flight stay on the revision they started on. With --upgrade auto (or
    --migrate ID) the runs that would move are replayed on FILE first; a run
    that would block refuses the deploy, with its diff, unless --force.

    Example:

        keepgoing deploy agent.py --name wf-durable-agent --shutdown-delay 20

        keepgoing deploy agent.py --upgrade auto

        keepgoing deploy agent.py --backend kubernetes --out k8s/ --image-repository reg/team
    """
    if backend == "kubernetes":
        _deploy_kubernetes(
            file,
            name=name,
            cpu=cpu,
            memory=memory,
            env=env,
            secret=secret,
            local_secret=local_secret,
            max_replicas=max_replicas,
            shutdown_delay=shutdown_delay,
            keep_warm_while_open=keep_warm_while_open,
            concurrency=concurrency,
            out=out,
            apply=apply,
            namespace=namespace,
            image_repository=image_repository,
            cluster_store=cluster_store,
            url=url,
            token=token,
            store=store,
        )
        return
    if backend != "local":
        fail(f"--backend must be local or kubernetes, not {backend!r}", 2)
    from keepgoing._client.deploy import deploy_workflow_worker  # noqa: PLC0415
    from keepgoing._groups.secrets import Secret  # noqa: PLC0415
    from keepgoing.errors import GroupError  # noqa: PLC0415

    with cli_errors():
        values: dict[str, str | Secret] = {}
        for item in env or ():
            key, sep, value = item.partition("=")
            if not sep:
                raise GroupError(f"--env {item!r} is not NAME=VALUE")
            values[key] = value
        kept = []
        for item in secret or ():
            secret_name, _, target = item.partition("=")
            kept.append(Secret.from_env(secret_name, alias=target or None))
        kept += [Secret.from_local_env(var) for var in local_secret or ()]
        with open_client(url, token, store) as client:
            worker = deploy_workflow_worker(
                file,
                name=name,
                cpu=cpu,
                memory=memory,
                env=values,
                secrets=kept,
                max_replicas=max_replicas,
                shutdown_delay_seconds=shutdown_delay,
                keep_warm_while_open=keep_warm_while_open,
                concurrency=concurrency,
                client=client,
                upgrade=upgrade,
                migrate=migrate or (),
                force=force,
                check_per_name=check_limit,
                check_time_limit=check_time_limit,
            )
    console.print(f"group {worker.scaling_group} revision {worker.revision}")
    if worker.replay is not None:
        console.print(f"replay check: {worker.replay.bound()}", markup=False)
        console.print(f"moved to revision {worker.revision}: {len(worker.moved)} run(s)")
        for run_id, why in sorted(worker.pinned.items()):
            console.print(f"run {run_id} stays on its revision: {why}", markup=False)
    console.print(f"task queue: {worker.task_queue}")
    for task_name, group in sorted(worker.task_workers.items()):
        console.print(f"task {task_name} runs on group {group}")


def _deploy_kubernetes(file: Path, **options: Any) -> None:
    from keepgoing._client.deploy import build_plan  # noqa: PLC0415
    from keepgoing.cli.deploy_kubernetes import deploy_to_kubernetes  # noqa: PLC0415

    with cli_errors():
        values, kept = _secret_options(options["env"], options["secret"], options["local_secret"])
        plan = build_plan(
            file,
            name=options["name"],
            cpu=options["cpu"],
            memory=options["memory"],
            env=values,
            secrets=kept,
            max_replicas=options["max_replicas"],
            shutdown_delay_seconds=options["shutdown_delay"],
            keep_warm_while_open=options["keep_warm_while_open"],
            concurrency=options["concurrency"],
            backend="kubernetes",
        )
        with open_client(options["url"], options["token"], options["store"]) as client:
            rendered = deploy_to_kubernetes(
                plan,
                client,
                out=options["out"],
                apply=options["apply"],
                cluster_store=options["cluster_store"],
                namespace=options["namespace"],
                image_repository=options["image_repository"],
                store=options["store"],
            )
    for group in rendered:
        console.print(f"group {group.group}: {group.folder}")
        console.print(f"  image {group.image} (docker build -t {group.image} {group.folder}/image)")
    if options["apply"]:
        console.print(f"applied {len(rendered)} group(s); KEDA scales them from the queue")


def _secret_options(
    env: list[str] | None, secret: list[str] | None, local_secret: list[str] | None
) -> tuple[dict[str, Any], list[Any]]:
    from keepgoing._groups.secrets import Secret  # noqa: PLC0415
    from keepgoing.errors import GroupError  # noqa: PLC0415

    values: dict[str, Any] = {}
    for item in env or ():
        key, sep, value = item.partition("=")
        if not sep:
            raise GroupError(f"--env {item!r} is not NAME=VALUE")
        values[key] = value
    kept: list[Any] = []
    for item in secret or ():
        secret_name, _, target = item.partition("=")
        kept.append(Secret.from_env(secret_name, alias=target or None))
    kept += [Secret.from_local_env(var) for var in local_secret or ()]
    return values, kept


def _when(at: float | None) -> str:
    if at is None:
        return ""
    return datetime.datetime.fromtimestamp(at).strftime("%H:%M:%S")


def _running(status: GroupStatus) -> int:
    return sum(i.state == "running" for i in status.instances)


@groups_app.command("ls")
def list_groups(
    url: UrlOption = None,
    token: TokenOption = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """List the worker groups with their replicas (desired and running).

    Example:

        keepgoing groups ls
    """
    with cli_errors(), open_client(url, token, store) as client:
        statuses = client.groups.statuses()
    if as_json:
        emit_json([s.to_body() for s in statuses])
        return
    table = Table(title=f"{len(statuses)} group(s)")
    for column in ("group", "queue", "revision", "replicas", "running", "max", "last decision"):
        table.add_column(column, overflow="fold")
    for s in statuses:
        last = s.decisions[0].reason if s.decisions else ""
        add_row(
            table,
            s.group.name,
            s.group.task_queue,
            str(s.group.revision),
            str(s.group.replicas),
            str(_running(s)),
            str(s.settings.get("max_replicas", "")),
            last,
        )
    console.print(table)


@groups_app.command("show")
def show_group(
    name: GroupArg,
    decisions: Annotated[int, typer.Option(help="How many decisions to show.")] = 20,
    url: UrlOption = None,
    token: TokenOption = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """A group's settings, instances, revisions (with the runs pinned to each) and its
    autoscaler decisions, newest first.

    Example:

        keepgoing groups show wf-pipeline
    """
    with cli_errors(), open_client(url, token, store) as client:
        status = client.groups.show(name, decisions=decisions)
    if as_json:
        emit_json(status.to_body())
        return
    g = status.group
    console.print(
        f"group {g.name} (revision {g.revision}, backend {g.backend}) serves {g.task_queue}",
        highlight=False,
    )
    cold = "not measured" if g.cold_start is None else f"{g.cold_start:.2f}s"
    console.print(f"replicas: {g.replicas} desired, {_running(status)} running; cold start {cold}")
    for key, value in status.settings.items():
        if value not in (None, [], {}, ""):
            console.print(f"  {key}: {value}", highlight=False, markup=False)
    table = Table(title="instances")
    for column in ("instance", "revision", "state", "pid", "started", "ended", "exit"):
        table.add_column(column)
    for i in status.instances:
        add_row(
            table,
            i.instance_id,
            str(i.revision),
            i.state,
            str(i.pid or ""),
            _when(i.started_at),
            _when(i.ended_at),
            "" if i.exit_status is None else str(i.exit_status),
        )
    console.print(table)
    if status.revisions:
        table = Table(title="revisions")
        for column in ("revision", "state", "open runs", "blocked", "upgrade", "deployed"):
            table.add_column(column)
        for r in status.revisions:
            state = "current" if r.current else "retired" if r.retired_at else "pinned"
            add_row(
                table,
                str(r.revision),
                state,
                str(r.open_runs),
                str(r.blocked_runs),
                r.upgrade,
                _when(r.created_at),
            )
        console.print(table)
    table = Table(title="decisions")
    for column in ("at", "replicas", "queued", "running", "reason"):
        table.add_column(column, overflow="fold")
    for d in status.decisions:
        add_row(
            table,
            _when(d.at),
            f"{d.from_replicas} -> {d.to_replicas}",
            str(d.queued),
            str(d.running),
            d.reason,
        )
    console.print(table)


@groups_app.command("scale")
def scale_group(
    name: GroupArg,
    replicas: Annotated[int, typer.Argument(help="Replicas to run now.")],
    url: UrlOption = None,
    token: TokenOption = None,
    store: StoreOption = None,
) -> None:
    """Set a group's replicas now; the autoscaler carries on from there (an idle group
    returns to zero after its shutdown delay).

    Example:

        keepgoing groups scale wf-pipeline 1
    """
    with cli_errors(), open_client(url, token, store) as client:
        client.groups.scale(name, replicas)
    console.print(f"group {name}: {replicas} replica(s)")


@groups_app.command("kill")
def kill_instance(
    name: GroupArg,
    instance: Annotated[
        str | None, typer.Argument(help="Instance id (default: the newest running).")
    ] = None,
    url: UrlOption = None,
    token: TokenOption = None,
    store: StoreOption = None,
) -> None:
    """SIGKILL one replica of a group. Its step is retried; the run carries on.

    Example:

        keepgoing groups kill wf-pipeline
    """
    with cli_errors(), open_client(url, token, store) as client:
        killed = client.groups.kill(name, instance, via="cli")
    console.print(f"killed {killed}")


@groups_app.command("rm")
def remove_group(
    name: GroupArg, url: UrlOption = None, token: TokenOption = None, store: StoreOption = None
) -> None:
    """Remove a group (and its per-task groups, revisions and uploaded secrets).

    Example:

        keepgoing groups rm wf-pipeline
    """
    with cli_errors(), open_client(url, token, store) as client:
        client.groups.remove(name)
    console.print(f"removed group {name}")


@groups_app.command("serve")
def serve_groups(
    store: StoreOption = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Debug logging.")] = False,
) -> None:
    """Run the autoscaler and the orchestrator services (timers, lease reaping, schedules) on a
    store, without a server: what a store-only deployment runs to get scaling.

    Example:

        keepgoing groups serve --store sqlite:///runs.db
    """
    from keepgoing._groups.service import group_autoscaler  # noqa: PLC0415
    from keepgoing._open_store import store_from_url  # noqa: PLC0415
    from keepgoing._procinfo import refuse_inspection  # noqa: PLC0415
    from keepgoing._schedules.service import Scheduler  # noqa: PLC0415
    from keepgoing._worker.orchestrator import Orchestrator  # noqa: PLC0415

    setup_logging(verbose)
    refuse_inspection()  # its replicas run deployed code as this user
    with cli_errors():
        the_store = store_from_url(announce_store(store))
        scaler = group_autoscaler(the_store)
        if scaler is None:
            fail("a store in memory cannot be shared with worker processes", 2)
    orchestrator = Orchestrator(the_store)
    schedules = Scheduler(the_store)

    async def serve() -> None:
        await the_store.open()
        loop = asyncio.get_running_loop()

        def stop() -> None:
            scaler.request_stop()
            orchestrator.request_stop()
            schedules.request_stop()

        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop)
        print(f"keepgoing groups serve: pid {os.getpid()}", file=sys.stderr, flush=True)
        try:
            await asyncio.gather(scaler.run(), orchestrator.run(), schedules.run())
        finally:
            await the_store.close()

    with cli_errors():
        asyncio.run(serve())


@secrets_app.command("set")
def set_secret(
    name: Annotated[str, typer.Argument(help="The secret's name.")],
    from_env: Annotated[
        str | None, typer.Option("--from-env", help="Read the value from this variable.")
    ] = None,
    url: UrlOption = None,
    token: TokenOption = None,
    store: StoreOption = None,
) -> None:
    """Keep a secret, encrypted (the value is read from --from-env or stdin, never an argument).

    Example:

        keepgoing secrets set ROUTER_API_KEY --from-env ROUTER_API_KEY
    """
    value = os.environ.get(from_env, "") if from_env else sys.stdin.read().rstrip("\n")
    if not value:
        fail(f"no value: {from_env} is not set" if from_env else "no value on stdin", 2)
    with cli_errors(), open_client(url, token, store) as client:
        client.groups.set_secret(name, value)
    console.print(f"secret {name} kept")


@secrets_app.command("ls")
def list_secrets(
    url: UrlOption = None,
    token: TokenOption = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """The names of the kept secrets (never their values).

    Example:

        keepgoing secrets ls
    """
    with cli_errors(), open_client(url, token, store) as client:
        names = client.groups.list_secrets()
    if as_json:
        emit_json(names)
        return
    for secret_name in names:
        console.print(secret_name, highlight=False, markup=False)


@secrets_app.command("rm")
def remove_secret(
    name: Annotated[str, typer.Argument(help="The secret's name.")],
    url: UrlOption = None,
    token: TokenOption = None,
    store: StoreOption = None,
) -> None:
    """Forget a kept secret.

    Example:

        keepgoing secrets rm ROUTER_API_KEY
    """
    with cli_errors(), open_client(url, token, store) as client:
        if not client.groups.remove_secret(name):
            fail(f"no secret named {name!r} is kept")
    console.print(f"secret {name} removed")


@secrets_app.command("key")
def new_key() -> None:
    """Print a new key for KEEPGOING_SECRET_KEY.

    Example:

        export KEEPGOING_SECRET_KEY=$(keepgoing secrets key)
    """
    from cryptography.fernet import Fernet  # noqa: PLC0415

    print(Fernet.generate_key().decode())
