"""Deploy agent.py as a scale-to-zero worker group, then trigger the week's digest.

keepgoing secrets set KEEPGOING_ROUTER_API_KEY --from-env KEEPGOING_ROUTER_API_KEY
python examples/support_digest/deploy.py [FH-1041 FH-1042 ...]   # default: the whole week

With no `keepgoing server`, `dev` or `groups serve` running for the store, the deploy
starts a background orchestrator for it (`keepgoing orchestrator status` shows it):
the group starts when the run is queued and stops shortly after it finishes.

The kept secret reaches the workers as ROUTER_API_KEY (a provider in
keepgoing.toml names it with `api_key_env`); with DIGEST_MODEL unset the agent
uses the offline scripted model and never reads it.
"""

from __future__ import annotations

import sys
from pathlib import Path

from agent import load_inbox

import keepgoing

if __name__ == "__main__":
    here = Path(__file__).resolve().parent
    count = load_inbox(here / "tickets.json")  # the helpdesk export the tools read
    ticket_ids = sys.argv[1:] or [f"FH-{1041 + n}" for n in range(count)]
    worker = keepgoing.deploy_workflow_worker(
        source=str(here / "agent.py"),
        name="wf-durable-agent",
        shutdown_delay_seconds=20,
        env={"ROUTER_API_KEY": keepgoing.Secret.from_env("KEEPGOING_ROUTER_API_KEY")},
    )
    run = keepgoing.Client().trigger_workflow(
        "support_digest",
        {"run_key": "week-42", "ticket_ids": ticket_ids},
        task_queue=worker.task_queue,
        wait=False,
    )
    print("task queue:", worker.task_queue)
    print("workflow id:", run.workflow_id)
    print(keepgoing.Client().result(run.workflow_id, timeout=900))
