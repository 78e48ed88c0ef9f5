"""Deploy agent.py as a scale-to-zero worker group, schedule it weekly, and trigger
this week's digest now.

keepgoing secrets set KEEPGOING_ROUTER_API_KEY --from-env KEEPGOING_ROUTER_API_KEY
python examples/support_digest/deploy.py [FH-1041 FH-1042 ...]   # default: the whole week

With no `keepgoing server`, `dev` or `groups serve` running for the store, the deploy
starts a background orchestrator for it (`keepgoing orchestrator status` shows it):
the group starts when the run is queued and stops shortly after it finishes.

The schedule `support-digest-weekly` starts the digest every Monday at 07:00 in
Paris (`keepgoing schedules show support-digest-weekly` lists its next fire times);
running this script again updates it.

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
    client = keepgoing.Client()
    weekly = {
        "cron": "0 7 * * 1",
        "timezone": "Europe/Paris",
        "task_queue": worker.task_queue,
        "note": "the Monday digest",
    }
    digest_input = {"run_key": "weekly-digest", "ticket_ids": ticket_ids}
    try:
        schedule = client.create_schedule(
            "support-digest-weekly", "support_digest", digest_input, **weekly
        )
    except keepgoing.ScheduleExistsError:
        schedule = client.update_schedule("support-digest-weekly", input=digest_input, **weekly)
    print("weekly schedule, next:", schedule.next_fire_times[0])
    run = client.trigger_workflow(
        "support_digest",
        {"run_key": "week-42", "ticket_ids": ticket_ids},
        task_queue=worker.task_queue,
        wait=False,
    )
    print("task queue:", worker.task_queue)
    print("workflow id:", run.workflow_id)
    print(client.result(run.workflow_id, timeout=900))
