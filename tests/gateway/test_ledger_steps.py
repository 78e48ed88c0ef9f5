"""Ledger rows tied to durable steps: committed with the step's completion, kept but
never counted as the step's success when their attempt failed or was killed."""

from __future__ import annotations

import shutil
import signal
from pathlib import Path

import pytest

import keepgoing

from ._fakes import Fake
from ._support import GatewayStack, wait_until

pytestmark = pytest.mark.integration

APP = Path(__file__).parent / "apps" / "agent.py"


def _worker_env(stack: GatewayStack, key: str) -> dict[str, str]:
    return {"KEEPGOING_URL": stack.url, "KEEPGOING_TOKEN": key}


def test_a_killed_attempts_call_never_counts_as_the_steps_success(
    gateway_stack: GatewayStack, fakes: tuple[Fake, Fake]
) -> None:
    stack = gateway_stack
    app = stack.root / "agent.py"
    shutil.copy(APP, app)
    key = stack.key("agent-key", also=["runs.read"])  # its calls name their run
    (stack.root / "hold-k1").write_text("")
    first = stack.start_worker(app, _worker_env(stack, key))
    client = keepgoing.Client(store=stack.store_url)
    try:
        handle = client.trigger_workflow("agent", {"key": "k1", "question": "capital?"})
        wait_until((stack.root / "called-k1-1").exists, 60, "the first model call")
        [open_row] = stack.calls(run_id=handle.run_id)
        assert (open_row.attempt, open_row.attempt_state) == (1, "open")
        assert (
            open_row.step is not None
            and open_row.operation_id == f"op-{handle.run_id}-{open_row.step}"
        )
        first.proc.send_signal(signal.SIGKILL)
        first.proc.wait(timeout=10)
        stack.start_worker(app, _worker_env(stack, key))
        result = client.result(handle, timeout=60)
    finally:
        client.close()
    assert result["attempt"] == 2 and result["text"] == "Paris is the capital of France."
    rows = {r.attempt: r for r in stack.calls(run_id=handle.run_id)}
    assert set(rows) == {1, 2}
    assert rows[1].attempt_state == "lost"  # kept (it was paid for), not the step's
    assert rows[2].attempt_state == "committed" and rows[2].call_id == result["call_id"]
    assert rows[1].step == rows[2].step
    # Both count against the key's spend: the killed attempt's tokens were paid for.
    assert all(r.cost > 0 for r in rows.values())


def test_a_failed_attempts_call_is_kept_as_failed(
    gateway_stack: GatewayStack, fakes: tuple[Fake, Fake]
) -> None:
    stack = gateway_stack
    app = stack.root / "agent.py"
    shutil.copy(APP, app)
    key = stack.key("flaky-key", also=["runs.read"])
    stack.start_worker(app, _worker_env(stack, key))
    client = keepgoing.Client(store=stack.store_url)
    try:
        handle = client.trigger_workflow("flaky_agent", {"key": "k2"})
        assert client.result(handle, timeout=60) == "hi"
    finally:
        client.close()
    states = sorted((r.attempt, r.attempt_state) for r in stack.calls(run_id=handle.run_id))
    assert states == [(1, "failed"), (2, "committed")]
