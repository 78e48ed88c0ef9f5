"""Scale-to-zero worker groups with real processes: `keepgoing groups serve` runs the
autoscaler, which starts and stops `keepgoing worker` replicas of deployed files."""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from cryptography.fernet import Fernet

import keepgoing
from keepgoing._history import events as ev
from keepgoing._store.group_records import DecisionRecord

from ._support import Sandbox, WorkerProcess, _proc_state, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

KEY = Fernet.generate_key().decode()
#: The image of groups_app's with_six task: this interpreter's version, and six.
SIX_IMAGE = keepgoing.Image.debian_slim("{}.{}".format(*sys.version_info[:2])).pip_install("six")


@pytest.fixture(scope="session")
def env_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One environment cache for the session: an image is built once and reused."""
    return tmp_path_factory.mktemp("env-cache")


@pytest.fixture(autouse=True)
def secret_key(monkeypatch: pytest.MonkeyPatch, env_cache: Path) -> None:
    monkeypatch.setenv("KEEPGOING_SECRET_KEY", KEY)
    monkeypatch.setenv("XDG_CACHE_HOME", str(env_cache))


@pytest.fixture
def sandbox(tmp_path: Path) -> Sandbox:
    return Sandbox(tmp_path)


class Scaler:
    """`keepgoing groups serve` on the sandbox's store, and the helpers to watch it."""

    def __init__(self, kg: Sandbox, client: keepgoing.Client) -> None:
        self.kg = kg
        self.client = client
        self.proc: WorkerProcess | None = None

    def start(self, **env: str) -> None:
        environ = {
            **self.kg.env(),
            "KEEPGOING_GROUPS_DIR": str(self.kg.root / "groups"),
            # A revision holds its source file only; the apps' helper module comes from here.
            "PYTHONPATH": str(self.kg.root),
            **env,
        }
        argv = [sys.executable, "-m", "keepgoing.cli", "groups", "serve", "--store", self.kg.url]
        self.proc = WorkerProcess("scaler", argv, self.kg.root, environ)

    def stop(self) -> None:
        if self.proc is not None:
            if self.proc.alive():
                self.proc.terminate(timeout=60)
            self.proc.reap()

    def running(self, group: str) -> int:
        status = self.client.groups.show(group, decisions=0)
        return sum(i.state == "running" for i in status.instances)

    def decisions(self, group: str) -> list[DecisionRecord]:
        return list(reversed(self.client.groups.show(group, decisions=1000).decisions))

    def logs(self) -> str:
        return self.proc.report() if self.proc is not None else ""


@pytest.fixture
def scaler(sandbox: Sandbox, client: keepgoing.Client) -> Iterator[Scaler]:
    s = Scaler(sandbox, client)
    try:
        yield s
    finally:
        s.stop()
        print(s.logs())


@pytest.fixture
def client(sandbox: Sandbox) -> Iterator[keepgoing.Client]:
    c = keepgoing.Client(store=sandbox.url)
    try:
        yield c
    finally:
        c.close()


def deploy(kg: Sandbox, client: keepgoing.Client, **options: object) -> keepgoing.WorkflowWorker:
    source = kg.app("groups_app")
    options.setdefault("shutdown_delay_seconds", 0.5)
    # A replica gets its group's env and nothing of the autoscaler's: the effects folder too.
    options["env"] = {"KG_TEST_DIR": kg.env()["KG_TEST_DIR"], **dict(options.get("env") or {})}  # type: ignore[call-overload]
    return keepgoing.deploy_workflow_worker(source, client=client, **options)  # type: ignore[arg-type]


def run_state(client: keepgoing.Client, workflow_id: str) -> str:
    return client.get_run(workflow_id).status


def test_deploy_trigger_scales_zero_one_zero(
    sandbox: Sandbox, client: keepgoing.Client, scaler: Scaler
) -> None:
    worker = deploy(sandbox, client, name="wf-groups")
    assert (worker.scaling_group, worker.task_queue) == ("wf-groups", "workflows.wf-groups")
    assert worker.task_workers == {"with_six": f"wf-groups-{SIX_IMAGE.hash[:8]}"}
    assert client.list_runs() == []  # deploying starts no run
    scaler.start()
    status = client.groups.show("wf-groups")
    assert status.group.replicas == 0 and status.group.revision == 1

    handle = worker.trigger("quick", {"key": "k1"})
    assert client.result(handle.workflow_id, timeout=60) == "k1"
    assert client.get_run(handle.workflow_id).group_revision == 1
    wait_until(lambda: scaler.running("wf-groups") == 0, 30, "the group to go back to 0")
    moves = [(d.from_replicas, d.to_replicas) for d in scaler.decisions("wf-groups")]
    assert moves[:2] == [(0, 1), (1, 0)]
    assert scaler.decisions("wf-groups")[0].reason.startswith("scale up: ")
    assert client.groups.show("wf-groups").group.cold_start is not None


@pytest.mark.timeout(150)
def test_a_sleeping_run_holds_no_replica_and_its_group_wakes(
    sandbox: Sandbox, client: keepgoing.Client, scaler: Scaler
) -> None:
    worker = deploy(sandbox, client, name="wf-sleep")
    scaler.start()
    handle = worker.trigger("sleeper", {"seconds": 20})
    wait_until(lambda: sandbox.effects(task="step", key="before"), 60, "the first step")
    # While it sleeps the group goes to zero: no process waits for the timer.
    wait_until(lambda: scaler.running("wf-sleep") == 0, 30, "the group to scale to 0")
    assert run_state(client, handle.workflow_id) == "running"
    assert not sandbox.effects(task="step", key="after")
    assert client.result(handle.workflow_id, timeout=90) == ["before", "after"]
    reasons = [d.reason for d in scaler.decisions("wf-sleep")]
    assert any("timer is due" in r for r in reasons), reasons  # woken ahead for the timer
    after = sandbox.effects(task="step", key="after")[0]
    before = sandbox.effects(task="step", key="before")[0]
    assert after.pid != before.pid  # a fresh replica ran the next step


@pytest.mark.timeout(240)
def test_a_task_image_runs_in_its_own_environment_and_group(
    sandbox: Sandbox, client: keepgoing.Client, scaler: Scaler
) -> None:
    worker = deploy(sandbox, client, name="wf-images")
    (task_group,) = set(worker.task_workers.values())
    scaler.start()
    result = worker.trigger("images", {}, wait=True, timeout=200)
    assert result["main_has_six"] is False  # the main group cannot import it
    assert result["task"]["six"]  # the task's group can
    assert result["task"]["pid"] != result["pid"]
    history = client.history(worker.trigger("images", {}).workflow_id)
    assert client.groups.show(task_group).group.parent == "wf-images"
    scheduled = [e for e in history if isinstance(e, ev.TaskScheduled)]
    assert not scheduled or scheduled[0].task_queue in (None, f"workflows.{task_group}")


def test_max_replicas_holds_under_a_burst(
    sandbox: Sandbox, client: keepgoing.Client, scaler: Scaler
) -> None:
    worker = deploy(sandbox, client, name="wf-burst", max_replicas=2, concurrency=1)
    scaler.start()
    handles = [worker.trigger("hold", {"key": f"b{i}"}) for i in range(5)]
    wait_until(lambda: len(sandbox.effects("start", "held")) >= 2, 60, "two held steps")
    wait_until(lambda: scaler.running("wf-burst") == 2, 30, "two replicas")
    assert max(d.to_replicas for d in scaler.decisions("wf-burst")) == 2
    for i in range(5):
        sandbox.release(f"release-b{i}")
    for h in handles:
        assert client.result(h.workflow_id, timeout=60).startswith("b")
    assert max(d.to_replicas for d in scaler.decisions("wf-burst")) == 2
    assert len({e.pid for e in sandbox.effects("done", "held")}) <= 2 + 2  # never a crowd


def test_redeploy_adds_a_revision_and_old_runs_keep_theirs(
    sandbox: Sandbox, client: keepgoing.Client, scaler: Scaler
) -> None:
    first = deploy(sandbox, client, name="wf-redeploy")
    scaler.start()
    old = first.trigger("hold", {"key": "old"})
    wait_until(lambda: sandbox.effects("start", "held", "old"), 60, "the old run's step")
    source = sandbox.root / "groups_app.py"
    source.write_text(source.read_text() + "\n# revision two\n")
    second = keepgoing.deploy_workflow_worker(
        source,
        name="wf-redeploy",
        client=client,
        shutdown_delay_seconds=0.5,
        env={"KG_TEST_DIR": sandbox.env()["KG_TEST_DIR"]},
    )
    assert (first.revision, second.revision) == (1, 2)
    new = second.trigger("quick", {"key": "new"})
    sandbox.release("release-old")
    assert client.result(new.workflow_id, timeout=60) == "new"
    assert client.result(old.workflow_id, timeout=60) == "old"
    assert client.get_run(old.workflow_id).group_revision == 1
    assert client.get_run(new.workflow_id).group_revision == 2
    assert client.groups.show("wf-redeploy").group.revision == 2


def test_killing_an_instance_mid_step_costs_one_retry(
    sandbox: Sandbox, client: keepgoing.Client, scaler: Scaler
) -> None:
    worker = deploy(sandbox, client, name="wf-kill")
    scaler.start()
    handle = worker.trigger("hold", {"key": "k"})
    wait_until(lambda: sandbox.effects("start", "held", "k"), 60, "the held step")
    killed = client.groups.kill("wf-kill")
    assert killed.startswith("wf-kill-")
    wait_until(lambda: len(sandbox.effects("start", "held", "k")) == 2, 60, "the retry")
    sandbox.release("release-k")
    assert client.result(handle.workflow_id, timeout=60) == "k"
    failures = [
        e for e in client.history(handle.workflow_id) if isinstance(e, ev.TaskAttemptFailed)
    ]
    assert [(f.reason, f.cause, f.via) for f in failures] == [
        ("worker_lost", "killed_by_request", "api")
    ]
    exits = [
        i.exit_status for i in client.groups.show("wf-kill").instances if i.instance_id == killed
    ]
    assert exits in ([-9], [None])  # SIGKILL (None: its row was not synced yet)
    with pytest.raises(keepgoing.GroupNotFoundError):
        client.groups.kill("wf-kill", "wf-kill-1")


def test_a_planted_secret_never_leaks(
    sandbox: Sandbox, client: keepgoing.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Deployed over HTTP to a real server, whose autoscaler runs the group."""
    from server._support import free_port, make_token  # noqa: PLC0415

    planted = f"planted-{uuid.uuid4().hex}"
    token = make_token(sandbox.url, "root", ["admin"])
    port = free_port()
    env = {
        **sandbox.env(),
        "KEEPGOING_GROUPS_DIR": str(sandbox.root / "groups"),
        "PYTHONPATH": str(sandbox.root),
    }
    argv = [sys.executable, "-m", "keepgoing.cli", "server", "--store", sandbox.url]
    server = WorkerProcess("server", [*argv, "--port", str(port)], sandbox.root, env)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: _healthy(url), 30, "the server")
        remote = keepgoing.Client(url, token=token)
        monkeypatch.setenv("PLANTED", planted)
        worker = deploy(
            sandbox,
            remote,
            name="wf-secret",
            env={"PLANTED": keepgoing.Secret.from_local_env("PLANTED"), "PLAIN": "visible"},
        )
        monkeypatch.delenv("PLANTED")
        handle = worker.trigger("secret", {})
        digest = client.result(handle.workflow_id, timeout=60)
        assert digest == hashlib.sha256(planted.encode()).hexdigest()  # it was injected

        history = client.history(handle.workflow_id)
        failed = [e for e in history if isinstance(e, ev.TaskAttemptFailed)]
        assert failed and "[secret PLANTED]" in failed[0].error.message  # type: ignore[union-attr]
        texts = {"history": json.dumps([repr(e) for e in history])}
        headers = {"Authorization": f"Bearer {token}"}
        for path in (
            f"/api/v1/runs/{handle.workflow_id}",
            f"/api/v1/runs/{handle.workflow_id}/history",
            "/api/v1/groups",
            "/api/v1/groups/wf-secret",
            "/api/v1/audit",
            "/api/v1/secrets",
            "/metrics",
        ):
            answer = httpx.get(url + path, headers=headers, timeout=10)
            assert answer.status_code == 200, (path, answer.text)
            texts[path] = answer.text
        assert "PLANTED" in texts["/api/v1/groups/wf-secret"]  # the name is shown, not the value
        wait_until(lambda: remote.groups.show("wf-secret").group.replicas == 0, 30, "idle")
        remote.close()
    finally:
        if server.alive():
            server.terminate(timeout=60)
        server.reap()
    texts["logs"] = server.report()
    assert "using the secret [secret PLANTED]" in texts["logs"]
    assert "stdout sees [secret PLANTED]" in texts["logs"]
    with sqlite3.connect(sandbox.db) as db:
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        for table in tables:
            texts[f"table {table}"] = repr(db.execute(f'SELECT * FROM "{table}"').fetchall())
    assert [where for where, text in texts.items() if planted in text] == []


def _healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/healthz", timeout=1.0).status_code == 200
    except httpx.TransportError:
        return False


def test_the_readme_flow_runs_as_written(sandbox: Sandbox, scaler: Scaler) -> None:
    """examples/support_digest/deploy.py: a kept secret, deploy, trigger by name, the result."""
    examples = Path(__file__).parents[2] / "examples" / "support_digest"
    for name in ("agent.py", "deploy.py", "tickets.json"):
        shutil.copy(examples / name, sandbox.root / name)
    env = {
        **sandbox.env(),
        "KEEPGOING_STORE": sandbox.url,
        "KEEPGOING_ROUTER_API_KEY": "rk-123456",
        "SUPPORT_DIGEST_STATE": str(sandbox.root / "directory"),
    }
    kept = subprocess.run(
        [
            sys.executable,
            "-m",
            "keepgoing.cli",
            "secrets",
            "set",
            "KEEPGOING_ROUTER_API_KEY",
            "--from-env",
            "KEEPGOING_ROUTER_API_KEY",
        ],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert kept.returncode == 0, kept.stderr
    scaler.start()
    env.pop("KEEPGOING_ROUTER_API_KEY")
    done = subprocess.run(
        [sys.executable, str(sandbox.root / "deploy.py"), "FH-1041", "FH-1042"],
        env=env,
        cwd=sandbox.root,
        capture_output=True,
        text=True,
        timeout=100,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "task queue: workflows.wf-durable-agent" in done.stdout
    assert "'tickets': 2" in done.stdout
    assert "'model': 'keepgoing-scripted-1'" in done.stdout
    runs = scaler.client.list_runs()
    assert [r.group_revision for r in runs] == [1]
    weekly = scaler.client.get_schedule("support-digest-weekly")  # the Monday 07:00 digest
    assert weekly.spec.cron == "0 7 * * 1" and weekly.task_queue == "workflows.wf-durable-agent"
    assert "weekly schedule, next:" in done.stdout


def test_a_replica_stops_when_the_server_that_started_it_is_killed(
    sandbox: Sandbox, client: keepgoing.Client, scaler: Scaler
) -> None:
    worker = deploy(sandbox, client, name="wf-orphan")
    scaler.start()
    handle = worker.trigger("hold", {"key": "o"})
    wait_until(lambda: sandbox.effects("start", "held", "o"), 60, "the held step")
    assert scaler.proc is not None
    (instance,) = [i for i in client.groups.show("wf-orphan").instances if i.state == "running"]
    pid = int(instance.instance_id.rsplit("-", 1)[1])
    environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    assert f"KEEPGOING_SUPERVISOR_PID={scaler.proc.pid}".encode() in environ

    scaler.proc.kill()  # SIGKILL: the server cannot stop its replicas itself
    sandbox.release("release-o")  # the draining replica finishes the step it holds
    wait_until(lambda: _proc_state(pid) in ("gone", "Z"), 60, "the orphaned replica to stop")

    scaler.proc.reap()
    scaler.start()  # a new server's replica runs the rest of the run
    assert client.result(handle.workflow_id, timeout=60) == "o"
    assert len(sandbox.effects("start", "held", "o")) == 1  # the held step ran once
