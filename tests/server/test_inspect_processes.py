"""Logs per attempt, the steps view and killing the worker, against a real server and
real `keepgoing worker` processes, on SQLite and on PostgreSQL."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from cli.conftest import run_kg
from keepgoing._procinfo import start_ticks
from keepgoing._store.records import WorkerRecord
from keepgoing._worker import process as worker_process

from ._support import Stack, run_store, wait_until
from .test_api import _id, result, start

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

SECRET = "s3cr3t-value-for-the-logs"


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def stack(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    os.environ["APP_SECRET"] = SECRET  # inherited by the workers (cli_env keeps it)
    s = Stack(tmp_path_factory.mktemp(f"inspect-{request.param}"))
    if request.param == "postgresql":
        from postgres_support import migrated, reset  # noqa: PLC0415

        s.store_url = migrated(request.getfixturevalue("postgres_url"))
        reset(s.store_url)
    try:
        s.admin = s.token("root", "admin")
        s.start_server()
        s.start_worker("inspect_app", name="worker-a")
        yield s
    finally:
        s.cleanup()
        os.environ.pop("APP_SECRET", None)


@pytest.fixture
def admin(stack: Stack) -> Iterator[httpx.Client]:
    with stack.api(stack.admin) as client:
        yield client


def test_logs_per_attempt(stack: Stack, admin: httpx.Client) -> None:
    key = _id("logs")
    start(admin, "logged", {"key": key}, workflow_id=key)
    assert result(admin, key, timeout=60)["status"] == "completed"
    logs = admin.get(f"/api/v1/runs/{key}/logs").json()["logs"]
    by = {(x["cmd"], x["attempt"]): x for x in logs}
    first, second = by[(1, 1)]["text"], by[(1, 2)]["text"]
    assert "first=True" in first and "first=False" not in first  # attempts never mix
    assert "first=False" in second
    for text in (first, second):
        assert "stderr line with secret [redacted]" in text and SECRET not in text
        assert "WARNING inspect_app: a logging record of" in text
    flood = by[(2, 1)]
    assert flood["truncated"] and flood["size"] == 10 * 1024 * 1024
    assert len(flood["text"].encode()) < 64 * 1024 + 200
    assert "an attempt's log is cut at 64 KiB" in flood["text"]
    closer = by[(3, 1)]["text"]
    assert "raw \ufffd\ufffd bytes" in closer and "printed after closing stdout" in closer
    assert by[(4, 1)]["text"] == f"async task {key} speaks\n"
    only = admin.get(f"/api/v1/runs/{key}/logs", params={"cmd": 1, "attempt": 2}).json()
    assert [(x["cmd"], x["attempt"]) for x in only["logs"]] == [(1, 2)]
    assert admin.get("/api/v1/runs/nope/logs").status_code == 404
    shown = run_kg(stack.root, "show", key, "--logs", "--url", stack.url, "--token", stack.admin)
    assert shown.returncode == 0, shown.stderr
    assert "step 1 chatty · attempt 1" in shown.stdout and "first=True" in shown.stdout
    assert "step 2 flood · attempt 1" in shown.stdout and "(cut at 64 KiB)" in shown.stdout
    assert admin.get(f"/api/v1/runs/{key}/logs", params={"cmd": "x"}).status_code == 400

    steps = admin.get(f"/api/v1/runs/{key}/steps").json()
    assert steps["total"] == 4 and steps["next_offset"] is None
    chatty = steps["steps"][0]
    assert chatty["name"] == "chatty" and chatty["inputs"] == {"args": [key], "kwargs": {}}
    assert chatty["output"] == f"done {key}" and chatty["status"] == "completed"
    failed, ok = chatty["attempts"]
    assert failed["outcome"] == "error" and "first attempt fails" in failed["error"]["message"]
    assert "Traceback" in failed["error"]["traceback"] and ok["outcome"] == "completed"
    assert ok["duration"] is not None and chatty["operation_id"].startswith("op-")
    page = admin.get(f"/api/v1/runs/{key}/steps", params={"offset": 1, "limit": 2}).json()
    assert [s["cmd"] for s in page["steps"]] == [2, 3] and page["next_offset"] == 3


def _running_pid(stack: Stack, key: str) -> int:
    def found() -> int | None:
        for path in stack.root.glob(f"running-{key}-*"):
            return int(path.name.rsplit("-", 1)[1])
        return None

    return wait_until(found, 30, f"step waits_for_release of {key} to start")


def test_kill_the_worker_and_the_retry_completes(stack: Stack, admin: httpx.Client) -> None:
    key = _id("kill")
    start(admin, "killable", {"key": key}, workflow_id=key)
    pid = _running_pid(stack, key)
    other = stack.start_worker("inspect_app", name=f"worker-b-{key}")
    killed = admin.post(f"/api/v1/runs/{key}/kill-worker")
    assert killed.status_code == 200, killed.text
    body = killed.json()
    assert body["pid"] == pid and body["cmd"] == 3 and body["signal"] == "SIGKILL"
    victim = next(p for p in stack.processes if p.proc.pid == pid)
    assert victim.proc.wait(timeout=20) == -signal.SIGKILL
    (stack.root / f"release-{key}").touch()
    run = result(admin, key, timeout=60)
    assert run["status"] == "completed" and run["result"] == f"released on {other.proc.pid}"

    steps = admin.get(f"/api/v1/runs/{key}/steps").json()["steps"]
    lost, retried = steps[2]["attempts"]
    assert lost["outcome"] == "worker_lost" and lost["worker"] == body["worker_id"]
    assert lost["cause"] == "killed_by_request" and lost["killed_by"] == "root"
    assert retried["outcome"] == "completed" and retried["worker"] != body["worker_id"]
    memory = steps[0]
    assert [(m["volume"], m["version"]) for m in memory["memory"]] == [(f"mem-{key}", 1)]
    # The steps its killed worker completed were carried on by the replacement.
    assert memory["reused_output"] and memory["reused_by"] == retried["worker"]
    # The killed attempt's log was never stored: it died before its outcome.
    attempts = [
        x["attempt"]
        for x in admin.get(f"/api/v1/runs/{key}/logs", params={"cmd": 3}).json()["logs"]
    ]
    assert attempts == [2]

    audit = admin.get("/api/v1/audit", params={"action": "worker.kill"}).json()["entries"]
    mine = [e for e in audit if e["workflow_id"] == key]
    assert mine and mine[0]["actor_id"] == "root" and mine[0]["detail"]["pid"] == pid
    nothing = admin.post(f"/api/v1/runs/{key}/kill-worker")
    assert nothing.status_code == 409 and nothing.json()["code"] == "nothing_running"
    # Its registry row outlives it; a second kill finds the process gone.
    again = admin.post(f"/api/v1/workers/{body['worker_id']}/kill")
    assert again.status_code == 409 and again.json()["details"]["reason"] == "gone"


def test_a_forged_row_kills_nothing_and_is_audited(stack: Stack, admin: httpx.Client) -> None:
    """Everything a row says about a process can be read from /proc or the workers list;
    a row naming an unrelated process with its true pid and start time (and any nonce
    hash) is refused, since that process holds no nonce, and the refusal is audited."""
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        ticks = wait_until(lambda: start_ticks(bystander.pid), 10, "the bystander to start")
        exact = {
            **worker_process.identity(),
            "pid": bystander.pid,
            "start_ticks": ticks,
            "nonce_sha256": "0f" * 32,
        }
        real = next(
            w
            for w in run_store(stack.store_url, lambda s: s.list_workers())
            if not w.worker_id.startswith("fake") and "process" in w.info
        )
        # A real worker's own nonce hash, copied from its public row, proves nothing
        # about another process either.
        copied = {**exact, "nonce_sha256": real.info["process"]["nonce_sha256"]}
        for worker_id, info in (("forged-exact", exact), ("forged-copied", copied)):
            _fake_worker(stack, worker_id, bystander.pid, {"process": info})
            refused = admin.post(f"/api/v1/workers/{worker_id}/kill", json={"via": "ui"})
            assert refused.status_code == 409, refused.text
            assert refused.json()["details"]["reason"] == "unproven", refused.text
        assert bystander.poll() is None  # never signalled
        audit = admin.get("/api/v1/audit", params={"action": "worker.kill_refused"}).json()
        entries = {e["detail"]["worker_id"]: e for e in audit["entries"]}
        for worker_id in ("forged-exact", "forged-copied"):
            entry = entries[worker_id]
            assert entry["actor_id"] == "root" and entry["detail"]["reason"] == "unproven"
            assert entry["detail"]["pid"] == bystander.pid
        kills = admin.get("/api/v1/audit", params={"action": "worker.kill"}).json()["entries"]
        assert not [e for e in kills if str(e["detail"]["worker_id"]).startswith("forged")]
    finally:
        bystander.kill()
        bystander.wait()


def test_a_worker_started_by_hand_holds_a_nonce_no_child_inherits(stack: Stack) -> None:
    workers = run_store(stack.store_url, lambda s: s.list_workers())
    real = [w for w in workers if not w.worker_id.startswith(("fake", "forged"))]
    alive = [w for w in real if Path(f"/proc/{w.pid}").exists() and "process" in w.info]
    assert alive
    for w in alive:
        digest = w.info["process"]["nonce_sha256"]
        environ = Path(f"/proc/{w.pid}/environ").read_bytes().split(b"\0")
        given = [e for e in environ if e.startswith(worker_process.NONCE_ENV.encode() + b"=")]
        assert len(given) == 1
        nonce = given[0].split(b"=", 1)[1]
        assert hashlib.sha256(nonce).hexdigest() == digest
        # The nonce is not in the registry row, in any form but its hash.
        assert nonce.decode() not in json.dumps(w.info)


def _fake_worker(stack: Stack, worker_id: str, pid: int, info: dict[str, object]) -> None:
    now = time.time()
    record = WorkerRecord(worker_id, ["nowhere"], "somehost", pid, now, now, info)
    run_store(stack.store_url, lambda s: s.register_worker(record))


def test_kill_refuses_what_it_cannot_verify(stack: Stack, admin: httpx.Client) -> None:
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        me = {**worker_process.identity(), "nonce_sha256": "ab" * 32}
        # Its pid, but a start time that is not its own: a reused pid is never signalled.
        reused = {**me, "pid": bystander.pid, "start_ticks": (me["start_ticks"] or 0) + 1}
        cases = {
            "fake-reused": (bystander.pid, {"process": reused}, "pid_reused"),
            "fake-elsewhere": (
                bystander.pid,
                {"process": {**reused, "machine_id": "another-machine", "host": "far"}},
                "other_host",
            ),
            "fake-plain": (bystander.pid, {}, "no_identity"),
            "fake-inproc": (bystander.pid, {"process": {**reused, "kind": "client"}}, "not_plain"),
        }
        for worker_id, (pid, info, reason) in cases.items():
            _fake_worker(stack, worker_id, pid, info)
            refused = admin.post(f"/api/v1/workers/{worker_id}/kill")
            assert refused.status_code == 409, refused.text
            assert refused.json()["details"]["reason"] == reason, refused.text
        assert bystander.poll() is None  # never signalled
    finally:
        bystander.kill()
        bystander.wait()
    assert admin.post("/api/v1/workers/no-such-worker/kill").status_code == 404
    assert admin.post("/api/v1/workers/bad id!/kill").status_code in (400, 404)
    reader = stack.token("reader", "runs.read")
    with stack.api(reader) as api:
        denied = api.post("/api/v1/workers/fake-plain/kill")
        assert denied.status_code == 403 and "workers.kill" in denied.text
        assert api.post("/api/v1/runs/anything/kill-worker").status_code == 403
    killer = stack.token("killer", "workers.kill")
    with stack.api(killer) as api:
        assert api.post("/api/v1/workers/fake-plain/kill").status_code == 409


def test_worker_rows_carry_their_identity(stack: Stack) -> None:
    workers = run_store(stack.store_url, lambda s: s.list_workers())
    real = [w for w in workers if "process" in w.info and not w.worker_id.startswith("fake")]
    assert real and all(w.info["process"]["pid"] == w.pid for w in real)
    assert all(w.info["process"]["kind"] == "keepgoing worker" for w in real)
    alive = {p.proc.pid for p in stack.processes if p.alive() and p.name.startswith("worker")}
    assert alive and alive <= {w.pid for w in real}
    assert all(Path(f"/proc/{pid}").exists() for pid in alive)


def test_streams_on_this_store(admin: httpx.Client) -> None:
    from ._sse import events  # noqa: PLC0415

    key = _id("sse")
    timeout = httpx.Timeout(30.0, read=20.0)
    with admin.stream("GET", "/api/v1/stream/runs", timeout=timeout) as runs:
        lines = runs.iter_lines()
        assert next(lines) == "retry: 1000"
        next(lines)  # the stream listens from here on
        start(admin, "logged", {"key": key}, workflow_id=key)
        with admin.stream("GET", f"/api/v1/runs/{key}/stream", timeout=timeout) as one:
            kinds = [name for name, _, _ in events(one)]
        assert kinds[-1] == "end" and kinds.count("history") >= 10
        for name, _, data in events(lines):
            if data["run"]["workflow_id"] == key and data["run"]["status"] == "completed":
                assert name == "run" and data["change"] == "status"
                break
