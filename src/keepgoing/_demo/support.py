"""The support-digest agent's set-up on the demo's stack: its pace, its env, its tickets.

Both the agent's own group (``wf-durable-agent``) and the use case that shows its
rate limit (DIR-0429) deploy ``examples/support_digest/agent.py`` this way: the same
pace for its model calls, and the same folder for the customer directory's quota
(``SUPPORT_DIGEST_STATE``), so every replica of either group meets one directory.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

from keepgoing._demo.files import agent_file, tickets_file
from keepgoing._groups.secrets import Secret

if TYPE_CHECKING:  # the use cases deploy the agent through this module
    from keepgoing._client.deploy import WorkflowWorker
    from keepgoing._demo.usecases.base import DemoStack

__all__ = ["GROUP", "ROUTER_KEY", "Pace", "deploy_agent", "model_label"]

GROUP = "wf-durable-agent"
ROUTER_KEY = "KEEPGOING_ROUTER_API_KEY"


@dataclass(frozen=True)
class Pace:
    """How long the demo's run takes: tickets, batch size, the wait between batches
    and the least time a model call takes (the scripted model answers at once)."""

    tickets: int
    batch_size: int
    pause_seconds: float
    model_seconds: float

    @classmethod
    def of(cls, fast: bool) -> Pace:
        # Live: 48 tickets, 6 batches, 5 waits of 60 s and about 1 s a model call:
        # about seven minutes. Fast (CI): 16 tickets, 1 s waits, under 30 s.
        return cls(16, 4, 1.0, 0.12) if fast else cls(48, 8, 60.0, 1.0)


def model_label() -> str:
    """What the demo says about its model, on the page and in the terminal."""
    if os.environ.get(ROUTER_KEY) and os.environ.get("DIGEST_MODEL"):
        return f"{os.environ['DIGEST_MODEL']} (a real model through the gateway)"
    return "scripted: keepgoing's offline, deterministic model (not a language model)"


def deploy_agent(stack: DemoStack, name: str = GROUP) -> WorkflowWorker:
    """Load the week's tickets into the helpdesk volume and deploy the agent as the
    group ``name``."""
    _load_inbox(stack)
    pace = Pace.of(stack.fast)
    env: dict[str, str | Secret] = {
        "DIGEST_PACE": str(pace.model_seconds),
        "SUPPORT_DIGEST_STATE": str(stack.workdir / "directory"),
    }
    if os.environ.get(ROUTER_KEY):
        # A provider key: the same agent, a real model (keepgoing.toml names the
        # provider, whose api_key_env is ROUTER_API_KEY, and DIGEST_MODEL its alias).
        stack.client.groups.set_secret(ROUTER_KEY, os.environ[ROUTER_KEY])
        env["ROUTER_API_KEY"] = Secret.from_env(ROUTER_KEY)
        for passed in ("DIGEST_MODEL", "KEEPGOING_CONFIG"):
            if os.environ.get(passed):
                env[passed] = os.environ[passed]
    return stack.deploy(agent_file(), name, shutdown_delay_seconds=2 if stack.fast else 20, env=env)


def _load_inbox(stack: DemoStack) -> None:
    # In a child process: importing the agent here would register its task names
    # in this process, beside those of the use cases' files.
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); from agent import load_inbox; "
        "print(load_inbox(sys.argv[2], store=sys.argv[3]))"
    )
    store = stack.client.store.url
    done = subprocess.run(
        [sys.executable, "-c", code, str(agent_file().parent), str(tickets_file()), store],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    if done.returncode != 0:
        raise RuntimeError(f"loading the tickets failed: {done.stderr.strip()[-500:]}")
