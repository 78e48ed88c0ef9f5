"""Ledger rows tied to durable steps: committed with the step's completion, kept but
never counted as the step's success when their attempt failed or was killed."""

from __future__ import annotations

import shutil
import signal
from pathlib import Path
from typing import Any

import httpx
import pytest

import keepgoing

from ._fakes import Fake
from ._support import GatewayStack, make_token, wait_until

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
    _check_usage_views(stack, handle.workflow_id, handle.run_id, rows[1].step, rows)


def _check_usage_views(
    stack: GatewayStack, workflow_id: str, run_id: str, step: int | None, rows: dict[int, Any]
) -> None:
    """The usage route and the steps view show what each attempt of the step cost."""
    reader = make_token(stack.store_url, "usage-reader", ["gateway.read"])
    runs_only = make_token(stack.store_url, "runs-reader", ["runs.read"])
    usage = f"{stack.url}/api/v1/gateway/usage"
    query = {"run_id": run_id, "group_by": "attempt", "since": 0}
    denied = httpx.get(usage, params=query, headers=_bearer(runs_only), timeout=10)
    assert denied.status_code == 403 and denied.json()["code"] == "permission_denied"
    found = httpx.get(usage, params=query, headers=_bearer(reader), timeout=10)
    assert found.status_code == 200, found.text
    body = found.json()
    by_attempt = {(g["step"], g["attempt"]): g for g in body["groups"]}
    assert set(by_attempt) == {(step, 1), (step, 2)}
    for attempt, state in ((1, "lost"), (2, "committed")):
        group = by_attempt[(step, attempt)]
        assert group["attempt_state"] == state and group["workflow"] == "agent"
        assert group["cost"] == pytest.approx(rows[attempt].cost)
        assert group["tokens"] == rows[attempt].input_tokens + rows[attempt].output_tokens
    assert body["totals"]["cost"] == pytest.approx(sum(r.cost for r in rows.values()))
    assert sum(p["calls"] for p in body["series"]) == 2
    assert any(k["name"] == "agent-key" and k["spent_total"] > 0 for k in body["keys"])
    # The steps view (runs.read) carries the same figures, per attempt and summed.
    steps = httpx.get(
        f"{stack.url}/api/v1/runs/{workflow_id}/steps", headers=_bearer(runs_only), timeout=10
    ).json()["steps"]
    [asked] = [s for s in steps if s["cmd"] == step]
    assert asked["usage"]["calls"] == 2
    assert asked["usage"]["cost"] == pytest.approx(sum(r.cost for r in rows.values()))
    costs = {a["attempt"]: a["usage"]["cost"] for a in asked["attempts"]}
    assert costs == {1: pytest.approx(rows[1].cost), 2: pytest.approx(rows[2].cost)}


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


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
