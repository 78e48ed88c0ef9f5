"""``keepgoing demo`` (what ``make demo`` and CI run), on real processes.

The headless mode deploys the support-digest agent on the local backend, kills its
worker mid-step through the kill API, and checks the evidence; these tests then
read the store it leaves behind and check the same facts independently.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path

import pytest

from keepgoing import Client, Volume
from keepgoing._demo.headless import run_headless
from keepgoing._demo.record import kind, recorded, stale_fields
from keepgoing._demo.stack import LocalStack
from keepgoing._demo.usecases import DemoStack, Evidence, UseCase
from keepgoing._demo.usecases.holdback import lookups_of
from keepgoing._history import events as ev

pytestmark = pytest.mark.integration


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KEEPGOING_")}
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


def _headless(folder: Path, store: str | None = None) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "keepgoing.cli", "demo", "--headless", "--fast"]
    argv += ["--folder", str(folder)]
    extra = {"KEEPGOING_STORE": store} if store else {}
    return subprocess.run(
        argv, env=_env(**extra), capture_output=True, text=True, timeout=170, check=False
    )


def _check_store(url: str) -> None:
    """The facts, read from the store: one worker loss, every step completed once,
    memory versions only from completed attempts, the second run read the lessons."""
    with Client(store=url) as client:
        every = client.list_runs(limit=1000)
        # The use cases' runs (DIR-0429's is a digest too) are checked by tests/usecases;
        # here, the agent's two.
        runs = sorted(
            (
                r
                for r in every
                if r.workflow_name == "support_digest" and not r.workflow_id.startswith("DIR-")
            ),
            key=lambda r: r.created_at,
        )
        assert [r.status for r in runs] == ["completed", "completed"]
        first, second = (client.history(r.workflow_id) for r in runs)
        result = client.result(runs[0].workflow_id)
    done = Counter(e.cmd for e in first if isinstance(e, ev.TaskCompleted))
    scheduled = {e.cmd for e in first if isinstance(e, ev.TaskScheduled)}
    assert set(done) == scheduled and set(done.values()) == {1}
    lost = [e for e in first if isinstance(e, ev.TaskAttemptFailed) and e.reason == "worker_lost"]
    assert lost, "no attempt was lost to the killed worker"
    # The shipped recording is of this same scenario: it holds what this live run wrote.
    # A 429 is rare now (the lookups wait for the directory's limit): this run may have
    # had one that the recording has not, or the other way round; and a replica
    # stopped while its lookups wait for a token hands its attempts back (released).
    optional = {"TaskAttemptFailed(error)", "TaskAttemptFailed(released)"}
    fresh = [e for e in first if kind(e) not in optional]
    assert stale_fields(recorded(), fresh) == [], "re-record the demo: make record-demo"
    by_cmd = {e.cmd: e for e in first if isinstance(e, ev.TaskCompleted)}
    assert all(by_cmd[e.cmd].worker != e.worker for e in lost)  # a fresh worker finished it
    # The directory's limit held the lookups back: a 429 is rare, retried if it happens.
    failed = [e for e in first if isinstance(e, ev.TaskAttemptFailed) and e.reason == "error"]
    assert {e.name for e in failed} <= {"lookup_customer"} and len(failed) <= 1
    lookups = lookups_of(first)
    assert lookups.held > 0 and lookups.longest >= 0.4 and not lookups.failed
    assert any(isinstance(e, ev.TimerFired) for e in first)
    memory = Volume("support-digest", store=url)
    completed = {(e.cmd, e.attempt) for e in first if isinstance(e, ev.TaskCompleted)}
    mine = [v for v in memory.versions(limit=1000) if v.run_id == runs[0].run_id]
    assert mine and all((v.step, v.attempt) in completed for v in mine)
    assert {p for v in mine for p in v.paths} == {
        "lessons.md",
        "notes.md",
        "report.md",
        "scratchpad.md",
    }
    # The second run's first step read lessons.md, as the first run left it.
    recalled = next(e.result for e in second if isinstance(e, ev.TaskCompleted))
    assert result["lessons_learned"] and result["lessons_learned"][0] in recalled
    assert result["model"] == "keepgoing-scripted-1"


@pytest.mark.timeout(200)
def test_headless_demo_kills_the_worker_mid_step_and_the_agent_completes(tmp_path: Path) -> None:
    folder = tmp_path / "demo"
    done = _headless(folder)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "SIGKILL worker" in output and "in the middle of summarise_ticket" in output
    assert "Kill the worker. The agent keeps going." in output
    assert "FAIL" not in output
    assert "memory versions survived" in output
    # The four use cases ran too, each with its evidence.
    for line in (
        "customer context reused: ran once",
        "CRM log shows 1 write for op-",
        "waiting for review",
        "holds 0 replicas",
        "held back before they were sent",
    ):
        assert line in output, line
    _check_store(f"sqlite:///{folder / 'demo.db'}")
    assert (folder / "groups" / "wf-durable-agent" / "1" / "agent.py").is_file()
    assert (folder / "logs" / "wf-durable-agent.log").is_file()  # replica output kept there
    # Ctrl-C-free exit: no replica of the agent's group outlives the command.
    assert not _replicas_of(folder)


@pytest.mark.timeout(240)
def test_the_whole_live_demo_runs_on_postgresql(tmp_path: Path, postgres_url: str) -> None:
    from postgres_support import migrated, reset  # noqa: PLC0415

    url = migrated(postgres_url)
    reset(url)
    done = _headless(tmp_path / "demo", url)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "store postgresql://" in done.stdout
    _check_store(url)


def _replicas_of(folder: Path) -> list[int]:
    """Live processes running a source file under the demo's group folder."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if str(folder / "groups") in cmdline:
            found.append(int(entry.name))
    return found


def _wait(predicate, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


@pytest.mark.timeout(120)
def test_interactive_demo_serves_the_page_and_ctrl_c_leaves_no_process(tmp_path: Path) -> None:
    folder = tmp_path / "demo"
    log = tmp_path / "demo.out"
    argv = [sys.executable, "-m", "keepgoing.cli", "demo", "--fast", "--no-open", "--port", "0"]
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [*argv, "--folder", str(folder)], env=_env(), stdout=out, stderr=subprocess.STDOUT
        )
    try:
        _wait(lambda: "Open the demo:" in log.read_text(), 90, "the demo to start")
        _wait(lambda: bool(_replicas_of(folder)), 60, "the agent's worker to start")
        text = log.read_text()
        assert "started a live run: support_digest-" in text
        assert "deployed the agent's group wf-durable-agent" in text
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 0, log.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
    assert "stopped: the server, the autoscaler and its workers." in log.read_text()
    _wait(lambda: not _replicas_of(folder), 10, "the replicas to be gone")


# -- headless mode iterates the use cases -----------------------------------------------

TINY = textwrap.dedent(
    """
    from keepgoing import task, workflow

    @task
    def tiny_step(n: int) -> int:
        return n + 1

    @workflow
    async def tiny_case(n: int) -> int:
        return await tiny_step(n)
    """
)


def _tiny(key: str, holds: bool) -> UseCase:
    def start(stack: DemoStack) -> str:
        source = stack.workdir / "tiny_case.py"
        source.write_text(TINY)
        worker = stack.deploy(source, "wf-tiny", shutdown_delay_seconds=1)
        handle = stack.client.trigger_workflow("tiny_case", {"n": 41}, task_queue=worker.task_queue)
        return str(handle.workflow_id)

    def headless(stack: DemoStack, say: object) -> Evidence:
        workflow_id = start(stack)
        result = stack.client.result(workflow_id, timeout=60)
        ok = result == 42 and holds
        return Evidence(key, (f"tiny_case answered {result}",), ok)

    return UseCase(key, "Tiny", "Tests", "A use case of the tests.", start, headless)


def _raises(stack: DemoStack, say: object) -> Evidence:
    raise RuntimeError("the side service did not start")


@pytest.mark.timeout(120)
def test_headless_runs_each_use_case_and_fails_when_one_does_not_hold(tmp_path: Path) -> None:
    lines: list[str] = []
    broken = UseCase("BRK-0001", "Broken", "Tests", "Raises.", lambda s: "", _raises)
    with LocalStack(tmp_path / "demo", fast=True) as stack:
        held = run_headless(stack, lines.append, use_cases=(_tiny("TNY-0001", True),), digest=False)
        assert held, "\n".join(lines)
        assert "\n== TNY-0001 · Tiny (Tests)" in lines
        assert "  tiny_case answered 42" in lines
        failed = run_headless(
            stack, lines.append, use_cases=(_tiny("TNY-0002", False), broken), digest=False
        )
    text = "\n".join(lines)
    assert (tmp_path / "demo" / "logs" / "wf-tiny.log").is_file()  # replica output kept there
    assert "KEEPGOING_GROUPS_LOG_DIR" not in os.environ  # the process's environment put back
    assert not failed
    assert "-> TNY-0002: EVIDENCE DOES NOT HOLD" in text
    assert "FAIL the scenario raised RuntimeError('the side service did not start')" in text
    assert "FAILED: ['TNY-0002', 'BRK-0001']" in text


# -- a provider key: the same agent on a real (here: a fake OpenAI-compatible) model --------

RUN_AGENT = """
import json, sys
sys.path.insert(0, sys.argv[1])
from agent import load_inbox, support_digest
from keepgoing import Client
load_inbox(store=sys.argv[2])
with Client(store=sys.argv[2]) as client:
    print(json.dumps(client.run_workflow(
        support_digest, {"run_key": "k", "ticket_ids": ["FH-1041", "FH-1044"]})))
"""


def _fake_provider(seen: list[dict[str, object]]):  # type: ignore[no-untyped-def]
    import http.server  # noqa: PLC0415
    import json  # noqa: PLC0415
    import threading  # noqa: PLC0415

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen.append({"auth": self.headers.get("Authorization"), "body": body})
            tools = body.get("tools") or []
            message: dict[str, object] = {"role": "assistant", "content": "A real summary."}
            if tools:
                name = tools[0]["function"]["name"]
                field = next(iter(tools[0]["function"]["parameters"]["properties"]))
                value = "feature" if name == "set_category" else "product"
                message = {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": name, "arguments": json.dumps({field: value})},
                        }
                    ],
                }
            answer = {
                "id": "chatcmpl-fake",
                "object": "chat.completion",
                "created": 1,
                "model": "fake-model-1",
                "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
            }
            data = json.dumps(answer).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            return

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.mark.timeout(120)
def test_a_provider_key_makes_the_same_agent_use_a_real_model(tmp_path: Path) -> None:
    seen: list[dict[str, object]] = []
    server = _fake_provider(seen)
    try:
        config = tmp_path / "keepgoing.toml"
        config.write_text(
            textwrap.dedent(
                f"""
                [gateway.providers.router]
                type = "openai"
                base_url = "http://127.0.0.1:{server.server_address[1]}/v1"
                api_key_env = "ROUTER_API_KEY"

                [gateway.models.digest]
                provider = "router"
                model = "fake-model-1"
                """
            )
        )
        env = _env(
            DIGEST_MODEL="digest",
            KEEPGOING_CONFIG=str(config),
            ROUTER_API_KEY="rk-test-123",
            SUPPORT_DIGEST_STATE=str(tmp_path / "directory"),
        )
        examples = Path(__file__).parents[2] / "examples" / "support_digest"
        url = f"sqlite:///{tmp_path / 'agent.db'}"
        done = subprocess.run(
            [sys.executable, "-c", RUN_AGENT, str(examples), url],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=100,
            check=False,
        )
    finally:
        server.shutdown()
        server.server_close()
    assert done.returncode == 0, done.stderr
    result = __import__("json").loads(done.stdout.strip().splitlines()[-1])
    assert result["model"] == "fake-model-1"  # not keepgoing-scripted-1: no code changed
    assert seen and {s["auth"] for s in seen} == {"Bearer rk-test-123"}
    assert {s["body"]["model"] for s in seen} == {"fake-model-1"}  # type: ignore[index]
    memory = Volume("support-digest", store=url)
    assert "[feature -> product]" in memory.read_text("scratchpad.md")
