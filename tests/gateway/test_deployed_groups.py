"""A group deployed through a server calls its models through that server's gateway.

A real ``keepgoing server`` (with the fake providers' keys in its environment) runs
the autoscaler; the deployed ``deployed_agent`` app's replicas get the server's URL
and a key minted for their revision, never a provider key. Their calls land in the
server's ledger under the group's key (``group:<name>``), whose budget holds across
revisions; a redeploy rotates the key, and a revoked key is refused.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

import keepgoing
from keepgoing.errors import WorkflowFailedError

from ._fakes import Fake
from ._support import OPENAI_KEY, GatewayStack, cli_env, make_token, run_store, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

APP = Path(__file__).parent / "apps" / "deployed_agent.py"
GROUP = "wf-deployed-agent"


def _environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    pairs = (entry.partition(b"=") for entry in raw.split(b"\0") if entry)
    return {k.decode(): v.decode(errors="replace") for k, _, v in pairs}


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _models(stack: GatewayStack, token: str) -> int:
    return httpx.get(f"{stack.url}/v1/models", headers=_bearer(token), timeout=10).status_code


def _deploy(stack: GatewayStack, remote: keepgoing.Client, app: Path, mark: str) -> Any:
    return keepgoing.deploy_workflow_worker(
        app,
        client=remote,
        name=GROUP,
        shutdown_delay_seconds=0.5,
        env={"KG_TEST_DIR": str(stack.root), "DEPLOY_MARK": mark},
    )


@pytest.fixture(params=["sqlite", "postgresql"])
def stack(
    request: pytest.FixtureRequest, tmp_path: Path, fake_openai: Fake, fake_anthropic: Fake
) -> Any:
    url = None
    if request.param == "postgresql":
        from postgres_support import migrated, reset  # noqa: PLC0415

        url = migrated(request.getfixturevalue("postgres_url"))
        reset(url)
    stack = GatewayStack(tmp_path, fake_openai, fake_anthropic, store_url=url)
    stack.env["KEEPGOING_GROUPS_DIR"] = str(tmp_path / "groups")
    fake_openai.reset()
    try:
        stack.start_server()
        yield stack
    finally:
        stack.cleanup()


def test_a_deployed_groups_model_calls_go_through_the_servers_gateway(
    stack: GatewayStack,
) -> None:
    app = stack.root / "deployed_agent.py"
    shutil.copy(APP, app)
    admin = make_token(stack.store_url, "root", ["admin"])
    reader = make_token(stack.store_url, "usage-reader", ["gateway.read"])
    with keepgoing.Client(stack.url, token=admin) as remote:
        worker = _deploy(stack, remote, app, "1")
        handle = worker.trigger("deployed_agent", {"question": "capital?"})
        result = remote.result(handle.workflow_id, timeout=180)
        assert result["text"] == "Paris is the capital of France."

        # The replica's environment: the server's URL and a key, no provider key.
        env = _environ(result["pid"])
        assert env["KEEPGOING_URL"] == stack.url
        first_key = env["KEEPGOING_TOKEN"]
        assert first_key.startswith("kg_")
        assert "FAKE_OPENAI_KEY" not in env and "FAKE_ANTHROPIC_KEY" not in env
        assert not any(OPENAI_KEY in value for value in env.values())

        # The call is in the server's ledger, metered as the group's key, tied to the step.
        [row] = stack.calls(run_id=handle.run_id)
        assert row.call_id == result["call_id"] and row.key_id == f"group:{GROUP}"
        assert row.attempt_state == "committed" and row.cost > 0
        usage = httpx.get(
            f"{stack.url}/api/v1/gateway/usage",
            params={"run_id": handle.run_id, "group_by": "key", "since": 0},
            headers=_bearer(reader),
            timeout=10,
        )
        assert usage.status_code == 200, usage.text
        [group] = usage.json()["groups"]
        assert group["key_id"] == f"group:{GROUP}" and group["calls"] == 1

        # The key calls the gateway only.
        assert _models(stack, first_key) == 200
        runs = httpx.get(f"{stack.url}/api/v1/runs", headers=_bearer(first_key), timeout=10)
        assert runs.status_code == 403, runs.text

        # A redeploy rotates the key: the old revision's key is refused once it retires.
        _deploy(stack, remote, app, "2")
        wait_until(lambda: _models(stack, first_key) == 401, 120, "the old key revoked")
        again = remote.result(
            worker.trigger("deployed_agent", {"question": "again?"}).workflow_id, timeout=180
        )
        second_key = _environ(again["pid"])["KEEPGOING_TOKEN"]
        assert second_key != first_key and _models(stack, second_key) == 200

        # The group's budget spans its revisions: what revision 1 spent counts.
        budget = subprocess.run(
            [
                *(sys.executable, "-m", "keepgoing.cli", "gateway", "keys", "set"),
                *(f"group:{GROUP}", "--total-budget", repr(row.cost), "--store", stack.store_url),
            ],
            env=cli_env(stack.root),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert budget.returncode == 0, budget.stderr
        listed = run_store(stack.store_url, lambda s: s.get_gateway_key(f"group:{GROUP}"))
        assert listed.total_budget == row.cost
        over = worker.trigger("deployed_agent", {"question": "over budget?"})
        with pytest.raises(WorkflowFailedError):
            remote.result(over.workflow_id, timeout=180)
        [task] = run_store(stack.store_url, lambda s: s.run_tasks(over.run_id))
        assert task.attempt == 1 and task.status == "failed"  # not retried (retries=2)
        events = remote.history(over.workflow_id, run_id=over.run_id)
        failed = [e for e in events if type(e).__name__ == "TaskFailed"]
        assert failed and "BudgetExceededError" in failed[-1].error.type
        assert "total budget" in failed[-1].error.message

        # A revoked key is refused.
        token_id = second_key.split("_")[1]
        revoked = httpx.delete(
            f"{stack.url}/api/v1/tokens/{token_id}", headers=_bearer(admin), timeout=10
        )
        assert revoked.status_code == 200, revoked.text
        assert _models(stack, second_key) == 401
