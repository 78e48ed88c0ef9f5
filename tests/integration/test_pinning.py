"""Safe code changes with real processes: runs pinned to their revision, `patched()`
with upgrade="auto", a deploy refused by the replay check, and retirement.

`keepgoing groups serve` runs the autoscaler, which runs `keepgoing worker`
replicas of each revision that still has runs.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography.fernet import Fernet

import keepgoing
from keepgoing._history import events as ev
from keepgoing._store.group_records import RevisionStatus

from ._support import Sandbox, WorkerProcess, wait_until
from .test_groups import Scaler

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

KEY = Fernet.generate_key().decode()
GROUP = "wf-versioned"
STEP_ONE = "    steps = [await prepare(key)]  # STEP-ONE\n"
RENAMED = """

@task
def prepare_order(key: str) -> str:
    kg_effects.record("done", "prepare_order", key, kg_effects.attempt())
    return f"prepare_order@{revision()}"
"""
GUARDED = """    if patched("rename-prepare"):
        steps = [await prepare_order(key)]
    else:
        steps = [await prepare(key)]
"""


@pytest.fixture(scope="session")
def env_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("env-cache")


@pytest.fixture(autouse=True)
def secret_key(monkeypatch: pytest.MonkeyPatch, env_cache: Path) -> None:
    monkeypatch.setenv("KEEPGOING_SECRET_KEY", KEY)
    monkeypatch.setenv("XDG_CACHE_HOME", str(env_cache))


@pytest.fixture
def sandbox(tmp_path: Path) -> Sandbox:
    return Sandbox(tmp_path)


@pytest.fixture
def client(sandbox: Sandbox) -> Iterator[keepgoing.Client]:
    c = keepgoing.Client(store=sandbox.url)
    try:
        yield c
    finally:
        c.close()


@pytest.fixture
def scaler(sandbox: Sandbox, client: keepgoing.Client) -> Iterator[Scaler]:
    s = Scaler(sandbox, client)
    try:
        yield s
    finally:
        s.stop()
        print(s.logs())


def write_revision(sandbox: Sandbox, *, guarded: bool) -> Path:
    """Revision 2 of the app: the step renamed, behind a patched() guard or not."""
    source = sandbox.root / "versioned.py"
    text = (sandbox.root / "versioned_v1.py").read_text()
    assert STEP_ONE in text
    text = text.replace(
        STEP_ONE, GUARDED if guarded else "    steps = [await prepare_order(key)]\n"
    )
    if guarded:
        text = text.replace("from keepgoing import ", "from keepgoing import patched, ", 1)
    source.write_text(text + RENAMED)
    return source


def deploy(
    sandbox: Sandbox, client: keepgoing.Client, source: Path, **options: object
) -> keepgoing.WorkflowWorker:
    options.setdefault("shutdown_delay_seconds", 0.5)
    # A replica gets its group's env and nothing of the autoscaler's: the effects folder too.
    options["env"] = {"KG_TEST_DIR": sandbox.env()["KG_TEST_DIR"], **dict(options.get("env") or {})}  # type: ignore[call-overload]
    return keepgoing.deploy_workflow_worker(source, name=GROUP, client=client, **options)  # type: ignore[arg-type]


def first_revision(sandbox: Sandbox) -> Path:
    source = sandbox.app("versioned")
    (sandbox.root / "versioned_v1.py").write_text(source.read_text())
    return source


def revision_replicas(scaler: Scaler, revision: int) -> int:
    status = scaler.client.groups.show(GROUP, decisions=0)
    return sum(i.state == "running" and i.revision == revision for i in status.instances)


def revisions(client: keepgoing.Client) -> dict[int, RevisionStatus]:
    return {r.revision: r for r in client.groups.show(GROUP, decisions=0).revisions}


def test_waiting_runs_finish_on_their_revision_while_new_runs_use_the_next(
    sandbox: Sandbox, client: keepgoing.Client, scaler: Scaler
) -> None:
    v1 = deploy(sandbox, client, first_revision(sandbox))
    scaler.start()
    old = [v1.trigger("order", {"key": f"old{i}"}) for i in range(2)]
    for i in range(2):
        wait_until(lambda i=i: sandbox.effects("done", "prepare", f"old{i}"), 60, "v1's step")
    # The old runs wait on a message: revision 1 holds no replica meanwhile.
    wait_until(lambda: scaler.running(GROUP) == 0, 30, "the group to scale to 0")

    v2 = deploy(sandbox, client, write_revision(sandbox, guarded=False))
    assert v2.revision == 2
    new = v2.trigger("order", {"key": "new"})
    wait_until(lambda: sandbox.effects("done", "prepare_order", "new"), 60, "v2's step")
    assert revision_replicas(scaler, 1) == 0  # nothing of revision 1 is runnable yet

    for handle in old:
        client.send_workflow_message(handle.workflow_id, "go", "x")
    client.send_workflow_message(new.workflow_id, "go", "y")
    for handle in old:
        assert client.result(handle.workflow_id, timeout=60) == ["prepare@1", "finish:x@1"]
        assert client.get_run(handle.workflow_id).group_revision == 1
    assert client.result(new.workflow_id, timeout=60) == ["prepare_order@2", "finish:y@2"]
    assert all(client.get_run(h.workflow_id).status == "completed" for h in old)

    # The last run of revision 1 has ended: it is retired, and the retirement is logged.
    wait_until(lambda: revisions(client)[1].retired_at is not None, 30, "revision 1 retired")
    assert revisions(client)[2].retired_at is None
    reasons = [d.reason for d in scaler.decisions(GROUP)]
    assert "revision 1 retired: no run is left on it" in reasons
    audit = [e for e in client.list_audit() if e.action == "groups.retire_revision"]
    assert [e.detail for e in audit] == [{"group": GROUP, "revision": 1}]
    wait_until(lambda: revision_replicas(scaler, 1) == 0, 30, "revision 1's replicas gone")
    assert not (sandbox.root / "groups" / GROUP / "1").exists()


CHILD_V1 = "async def shipment(key: str) -> str:  # SHIPMENT\n    return await ship(key)\n"
CHILD_V2 = "async def shipment(order_key: str) -> str:\n    return await ship(order_key)\n"


def test_children_and_successors_of_a_pinned_run_start_on_its_revision(
    sandbox: Sandbox, client: keepgoing.Client, scaler: Scaler
) -> None:
    v1 = deploy(sandbox, client, first_revision(sandbox))
    scaler.start()
    old = v1.trigger("parent_order", {"key": "old"})
    wait_until(lambda: waits_for_message(client, old.workflow_id), 60, "v1's wait")

    # Revision 2 renames the child's parameter (and calls it by the new name).
    source = sandbox.root / "versioned.py"
    text = (sandbox.root / "versioned_v1.py").read_text()
    assert CHILD_V1 in text
    text = text.replace(CHILD_V1, CHILD_V2).replace('{"key": key}', '{"order_key": key}')
    source.write_text(text)
    v2 = deploy(sandbox, client, source)
    assert v2.revision == 2
    new = v2.trigger("parent_order", {"key": "new"})

    client.send_workflow_message(old.workflow_id, "go", "x")
    client.send_workflow_message(new.workflow_id, "go", "y")
    # The old parent's children and its successor run revision 1's code, which
    # still takes ``key``; on revision 2 they would fail with a TypeError.
    assert client.result(old.workflow_id, timeout=90) == ["ship@1", "parent@1"]
    assert client.result(new.workflow_id, timeout=90) == ["ship@2", "parent@2"]
    for child in ("old-ship-0", "old-ship-1"):
        run = client.get_run(child)
        assert (run.status, run.group_revision) == ("completed", 1)
    successor = client.get_run(old.workflow_id)
    (started,) = [e for e in client.history(old.workflow_id) if isinstance(e, ev.WorkflowStarted)]
    assert started.continued_from is not None and successor.group_revision == 1
    assert client.get_run("new-ship-1").group_revision == 2


def start_waiting(client: keepgoing.Client, worker: keepgoing.WorkflowWorker, n: int) -> list[str]:
    ids = [worker.trigger("order", {"key": f"old{i}"}).workflow_id for i in range(n)]
    for workflow_id in ids:
        # The step's effect comes before its result is recorded: wait for the recorded wait,
        # so a deploy's replay check sees a history that no longer moves.
        wait_until(lambda w=workflow_id: waits_for_message(client, w), 60, "v1's wait")
    return ids


def waits_for_message(client: keepgoing.Client, workflow_id: str) -> bool:
    history = client.history(workflow_id)
    return any(isinstance(e, ev.MessageWaitStarted) for e in history)


def test_upgrade_auto_with_a_patched_guard_moves_old_runs_down_the_old_branch(
    sandbox: Sandbox, client: keepgoing.Client, scaler: Scaler
) -> None:
    v1 = deploy(sandbox, client, first_revision(sandbox))
    scaler.start()
    old = start_waiting(client, v1, 2)

    v2 = deploy(sandbox, client, write_revision(sandbox, guarded=True), upgrade="auto")
    assert v2.replay is not None and v2.replay.failures == ()
    assert sorted(v2.moved) == sorted(client.get_run(w).run_id for w in old)
    assert v2.pinned == {}
    assert all(client.get_run(w).group_revision == 2 for w in old)
    new = v2.trigger("order", {"key": "new"}).workflow_id
    for workflow_id in [*old, new]:
        client.send_workflow_message(workflow_id, "go", "x")
    for workflow_id in old:  # prepared on v1; replayed and finished on v2, old branch
        assert client.result(workflow_id, timeout=60) == ["prepare@1", "finish:x@2"]
    assert client.result(new, timeout=60) == ["prepare_order@2", "finish:x@2"]
    for workflow_id in [*old, new]:
        history = client.history(workflow_id)
        assert not [e for e in history if isinstance(e, ev.WorkflowBlocked)]
    marks = [e for e in client.history(new) if isinstance(e, ev.PatchMarked)]
    assert [m.change_id for m in marks] == ["rename-prepare"]
    assert not [e for e in client.history(old[0]) if isinstance(e, ev.PatchMarked)]
    # Every v1 run moved: v1 is retired at once.
    wait_until(lambda: revisions(client)[1].retired_at is not None, 30, "revision 1 retired")


def test_without_the_guard_the_deploy_is_refused_with_the_diff(
    sandbox: Sandbox, client: keepgoing.Client, scaler: Scaler
) -> None:
    v1 = deploy(sandbox, client, first_revision(sandbox))
    scaler.start()
    (waiting,) = start_waiting(client, v1, 1)
    run_id = client.get_run(waiting).run_id
    unguarded = write_revision(sandbox, guarded=False)

    with pytest.raises(keepgoing.DeployRefusedError) as refused:
        deploy(sandbox, client, unguarded, upgrade="auto")
    report = refused.value.report
    (failure,) = report.failures
    assert (failure.run_id, failure.workflow_id, failure.revision) == (run_id, waiting, 1)
    assert "TaskScheduled #1 prepare" in (failure.error or "")
    assert "TaskScheduled #1 prepare_order" in (failure.error or "")
    message = str(refused.value)
    assert run_id in message and "prepare_order" in message
    assert "checked 1 run(s)" in message  # the bound is reported
    assert client.groups.show(GROUP).group.revision == 1  # nothing was deployed

    forced = deploy(sandbox, client, unguarded, upgrade="auto", force=True)
    assert forced.revision == 2 and forced.moved == ()
    assert forced.pinned == {run_id: "it would block on the new code"}
    client.send_workflow_message(waiting, "go", "z")
    assert client.result(waiting, timeout=60) == ["prepare@1", "finish:z@1"]
    assert client.get_run(waiting).group_revision == 1


def kg(sandbox: Sandbox, *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "keepgoing.cli", *args],
        cwd=sandbox.root,
        env={**sandbox.env(), "COLUMNS": "200", "PYTHONPATH": str(sandbox.root)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    print(f"$ keepgoing {' '.join(args)}\n[exit {done.returncode}]\n{done.stdout}{done.stderr}")
    return done


def test_the_cli_checks_exports_and_migrates(
    sandbox: Sandbox, client: keepgoing.Client, scaler: Scaler
) -> None:
    v1 = deploy(sandbox, client, first_revision(sandbox))
    scaler.start()
    (waiting,) = start_waiting(client, v1, 1)
    run_id = client.get_run(waiting).run_id
    store = ("--store", sandbox.url)
    guarded = write_revision(sandbox, guarded=True)
    unguarded = sandbox.root / "unguarded.py"
    shutil.copy(write_revision(sandbox, guarded=False), unguarded)
    guarded = write_revision(sandbox, guarded=True)

    exported = kg(sandbox, "history", "export", "--running", "-o", "running.json", *store)
    assert exported.returncode == 0, exported.stderr
    body = json.loads((sandbox.root / "running.json").read_text())
    assert [(r["run_id"], r["group_revision"]) for r in body["runs"]] == [(run_id, 1)]

    refused = kg(sandbox, "replay", "unguarded.py", "--against-store", "--export", "running.json")
    assert refused.returncode == 1
    assert run_id in refused.stdout and "prepare_order" in refused.stdout
    assert "checked 1 run(s)" in refused.stdout
    passed = kg(sandbox, "replay", str(guarded), "--against-store", *store, "--json")
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert json.loads(passed.stdout)["ok"] is True

    needing = kg(sandbox, "runs", "--needs-patch", "rename-prepare", "--json", *store)
    assert [r["workflow_id"] for r in json.loads(needing.stdout)] == [waiting]

    effects = f"KG_TEST_DIR={sandbox.env()['KG_TEST_DIR']}"
    deployed = kg(
        sandbox,
        "deploy",
        str(guarded),
        "--name",
        GROUP,
        "--shutdown-delay",
        "0.5",
        "--env",
        effects,
        *store,
    )
    assert deployed.returncode == 0, deployed.stderr
    assert client.get_run(waiting).group_revision == 1  # pinned by default
    shown_group = kg(sandbox, "groups", "show", GROUP, *store)
    assert shown_group.returncode == 0, shown_group.stderr
    assert re.search(r"\b1\s+\S\s+pinned\s+\S\s+1\b", shown_group.stdout)  # 1 open run
    assert re.search(r"\b2\s+\S\s+current\b", shown_group.stdout)

    bad = kg(sandbox, "runs", "migrate", waiting, "--to", "9", *store)
    assert bad.returncode == 1 and "no revision 9" in bad.stderr
    no = kg(sandbox, "runs", "migrate", waiting, "--to", "2", "--json", *store)
    assert no.returncode == 0, no.stderr
    assert json.loads(no.stdout)["to_revision"] == 2
    assert client.get_run(waiting).group_revision == 2
    client.send_workflow_message(waiting, "go", "m")
    assert client.result(waiting, timeout=60) == ["prepare@1", "finish:m@2"]
    audit = [e for e in client.list_audit() if e.action == "workflow.migrate"]
    assert [(e.run_id, e.detail) for e in audit] == [(run_id, {"from": 1, "to": 2})]
    fresh = client.trigger_workflow("order", {"key": "fresh"}, task_queue=f"workflows.{GROUP}")
    wait_until(lambda: sandbox.effects("done", "prepare_order", "fresh"), 60, "v2's step")
    shown = kg(sandbox, "show", fresh.workflow_id, *store)
    assert shown.returncode == 0, shown.stderr
    assert "group revision 2; patches passed: rename-prepare" in shown.stdout
    patched_only = kg(sandbox, "runs", "--needs-patch", "rename-prepare", "--json", *store)
    assert json.loads(patched_only.stdout) == []  # the old run ended; the new one passed it


def test_the_guides_example_runs(tmp_path: Path) -> None:
    """examples/safe_change.py, the example of docs/guide.md "Changing code safely"."""
    example = Path(__file__).resolve().parents[2] / "examples" / "safe_change.py"
    done = subprocess.run(
        [sys.executable, str(example)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=150,
        check=False,
    )
    print(done.stdout, done.stderr)
    assert done.returncode == 0
    lines = done.stdout.splitlines()
    assert "reserved stock and waits, on revision 1" in lines[0]
    assert "deployed revision 2; checked 1 run(s)" in lines[1] and "moved 1 run(s)" in lines[1]
    assert lines[2].endswith("['reserved A-1', 'shipped A-1']")  # the old branch
    assert lines[3].endswith("['held B-2 for 30 min', 'shipped B-2']")  # the new one
    assert lines[4] == "revision 1 is retired: no run is left on it"


def test_over_http_the_refusal_carries_its_report_and_a_run_migrates(
    sandbox: Sandbox, client: keepgoing.Client
) -> None:
    """A real server, whose autoscaler runs the group; the client deploys over HTTP."""
    from server._support import free_port, make_token  # noqa: PLC0415

    from .test_groups import _healthy  # noqa: PLC0415

    token = make_token(sandbox.url, "root", ["admin"])
    port = free_port()
    env = {
        **sandbox.env(),
        "KEEPGOING_GROUPS_DIR": str(sandbox.root / "groups"),
        "PYTHONPATH": str(sandbox.root),
        "KEEPGOING_SECRET_KEY": KEY,
    }
    argv = [sys.executable, "-m", "keepgoing.cli", "server", "--store", sandbox.url]
    server = WorkerProcess("server", [*argv, "--port", str(port)], sandbox.root, env)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: _healthy(url), 30, "the server")
        remote = keepgoing.Client(url, token=token)
        v1 = deploy(sandbox, remote, first_revision(sandbox))
        (waiting,) = start_waiting(client, v1, 1)
        run_id = client.get_run(waiting).run_id
        unguarded = sandbox.root / "unguarded.py"
        shutil.copy(write_revision(sandbox, guarded=False), unguarded)
        with pytest.raises(keepgoing.DeployRefusedError) as refused:
            deploy(sandbox, remote, unguarded, upgrade="auto")
        (failure,) = refused.value.report.failures
        assert failure.run_id == run_id and "prepare_order" in (failure.error or "")
        assert remote.groups.show(GROUP).group.revision == 1

        guarded = write_revision(sandbox, guarded=True)
        v2 = deploy(sandbox, remote, guarded)  # pinned: nothing is checked or moved
        assert v2.revision == 2 and v2.replay is None and v2.moved == ()
        assert (
            remote.groups.revision(GROUP, 1).source
            == (sandbox.root / "versioned_v1.py").read_text()
        )
        with pytest.raises(keepgoing.DeployRefusedError):
            deploy(sandbox, remote, unguarded, migrate=[waiting])  # named: checked too
        moved = remote.groups.migrate(waiting, 2)
        assert (moved.from_revision, moved.to_revision) == (1, 2) and moved.report is not None
        with pytest.raises(keepgoing.GroupNotFoundError, match="no revision 7"):
            remote.groups.migrate(waiting, 7)
        remote.send_workflow_message(waiting, "go", "h")
        assert remote.result(waiting, timeout=60) == ["prepare@1", "finish:h@2"]
        remote.close()
    finally:
        if server.alive():
            server.terminate(timeout=60)
        server.reap()
        print(server.report())


TWO_SITES = """# /// script
# dependencies = ["keepgoing"]
# ///
import os

import kg_effects

from keepgoing import patched, task, wait_for_message, workflow


def revision() -> str:
    return os.environ.get("KEEPGOING_GROUP_REVISION", "-")


def _done(name: str, key: str) -> str:
    kg_effects.record("done", name, key, kg_effects.attempt())
    return f"{name}@{revision()}"


@task
def prepare(key: str) -> str:
    return _done("prepare", key)


@task
def prepare_order(key: str) -> str:
    return _done("prepare_order", key)


@task
def finish(key: str) -> str:
    return _done("finish", key)


@task
def finish_order(key: str) -> str:
    return _done("finish_order", key)


@workflow
async def order(key: str) -> list[str]:
    # FIRST-SITE
    if patched("two-sites"):
        steps = [await prepare_order(key)]
    else:
        steps = [await prepare(key)]
    await wait_for_message("go")
    if patched("two-sites"):
        steps.append(await finish_order(key))
    else:
        steps.append(await finish(key))
    await wait_for_message("done")
    return steps
"""
FIRST_SITE = """    # FIRST-SITE
    if patched("two-sites"):
        steps = [await prepare_order(key)]
    else:
        steps = [await prepare(key)]
"""


def test_removing_the_first_of_two_patched_sites_keeps_runs_that_passed_both(
    sandbox: Sandbox, client: keepgoing.Client, scaler: Scaler
) -> None:
    sandbox.app("versioned")  # the effects helper beside it
    source = sandbox.root / "two_sites.py"
    source.write_text(TWO_SITES)
    v1 = deploy(sandbox, client, source)
    scaler.start()
    run = v1.trigger("order", {"key": "k"}).workflow_id
    wait_until(lambda: waits_for_message(client, run), 60, "the first wait")
    client.send_workflow_message(run, "go")
    wait_until(lambda: sandbox.effects("done", "finish_order", "k"), 60, "the second site")
    wait_until(
        lambda: sum(isinstance(e, ev.MessageWaitStarted) for e in client.history(run)) == 2,
        60,
        "the second wait",
    )

    # The first site's old branch is retired: its guard goes, the second site stays.
    source.write_text(TWO_SITES.replace(FIRST_SITE, "    steps = [await prepare_order(key)]\n"))
    v2 = deploy(sandbox, client, source, upgrade="auto")
    # The replay check replays the run past the second site: still the new branch there.
    assert v2.replay is not None and v2.replay.failures == ()
    assert list(v2.moved) == [client.get_run(run).run_id]
    client.send_workflow_message(run, "done")
    assert client.result(run, timeout=60) == ["prepare_order@1", "finish_order@1"]
    assert not [e for e in client.history(run) if isinstance(e, ev.WorkflowBlocked)]
    assert client.get_run(run).group_revision == 2


def test_a_resume_onto_a_newer_revision_is_refused_unless_its_history_replays_there(
    sandbox: Sandbox, client: keepgoing.Client, scaler: Scaler, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The check imports the revision's code in a subprocess; its neighbour kg_effects
    # is found as the replicas find it.
    monkeypatch.setenv("PYTHONPATH", str(sandbox.root))
    v1 = deploy(sandbox, client, first_revision(sandbox))
    scaler.start()
    wid = v1.trigger("order", {"key": "resumed"}).workflow_id
    run = client.get_run(wid)
    wait_until(lambda: sandbox.effects("done", "prepare", "resumed"), 60, "v1's step")
    client.cancel_workflow(wid)
    wait_until(lambda: client.get_run(wid).status == "cancelled", 30, "the cancel")

    v2 = deploy(sandbox, client, write_revision(sandbox, guarded=False))
    assert v2.revision == 2
    with pytest.raises(keepgoing.InvalidRequestError) as refused:
        client.resume_workflow(wid, revision=2)
    message = str(refused.value)
    assert "does not replay on revision 2's code" in message
    assert "TaskScheduled #1 prepare" in message and "prepare_order" in message
    assert client.get_run(wid).run_id == run.run_id  # nothing was started

    v3 = deploy(sandbox, client, write_revision(sandbox, guarded=True))
    assert v3.revision == 3
    resumed = client.resume_workflow(wid, revision=3)
    assert resumed.run_id != run.run_id
    assert client.get_run(wid).group_revision == 3
    client.send_workflow_message(wid, "go", "z")
    assert client.result(wid, timeout=60) == ["prepare@1", "finish:z@3"]


def test_a_fork_with_a_new_input_is_refused_when_a_reused_step_would_get_other_arguments(
    sandbox: Sandbox, client: keepgoing.Client, scaler: Scaler, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONPATH", str(sandbox.root))
    v1 = deploy(sandbox, client, first_revision(sandbox))
    scaler.start()
    wid = v1.trigger("order", {"key": "a"}).workflow_id
    wait_until(lambda: sandbox.effects("done", "prepare", "a"), 60, "v1's step")
    client.send_workflow_message(wid, "go", "x")
    assert client.result(wid, timeout=60) == ["prepare@1", "finish:x@1"]

    # A fork from step 3 (finish; #2 is the wait) reuses step 1, prepare(key), and the
    # message: a new key changes step 1's arguments.
    with pytest.raises(keepgoing.InvalidRequestError) as refused:
        client.fork_workflow(wid, 3, input={"key": "b"}, workflow_id="forked-b")
    message = str(refused.value)
    assert (
        "step 1 prepare was recorded with key='a', the new input schedules key='b'; "
        "fork from step 1 or earlier"
    ) in message
    with pytest.raises(keepgoing.RunNotFoundError):
        client.get_run("forked-b")  # nothing was started

    # The same key reuses step 1 soundly; a fork from step 1 reuses nothing.
    same = client.fork_workflow(wid, 3, input={"key": "a"}, workflow_id="forked-a")
    assert client.result(same.workflow_id, timeout=60) == ["prepare@1", "finish:x@1"]
    fresh = client.fork_workflow(wid, 1, input={"key": "b"}, workflow_id="forked-b")
    client.send_workflow_message(fresh.workflow_id, "go", "z")
    assert client.result(fresh.workflow_id, timeout=60) == ["prepare@1", "finish:z@1"]
