"""Messages with one name arrive in send order, across a worker restart."""

from __future__ import annotations

import pytest

import keepgoing
from keepgoing._history import events as ev

from ._messaging_support import waiting_for_message
from ._support import Sandbox, Workers, of_type, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


def test_a_hundred_messages_arrive_in_send_order_across_a_worker_restart(
    kg: Sandbox, workers: Workers, client: keepgoing.Client
) -> None:
    app = kg.app("messaging")
    first = workers.start(app)
    handle = client.trigger_workflow("collector", {"n": 100})
    workflow_id = handle.workflow_id

    sent = [client.send_workflow_message(workflow_id, "item", i) for i in range(50)]
    # The worker has taken all 50 and waits for the 51st before it is killed.
    wait_until(lambda: waiting_for_message(client, workflow_id, "item", 51), 30, "wait 51")
    first.kill()
    # Half of the rest while no worker runs, half to the new worker.
    sent += [client.send_workflow_message(workflow_id, "item", i) for i in range(50, 75)]
    second = workers.start(app)
    sent += [client.send_workflow_message(workflow_id, "item", i) for i in range(75, 100)]

    assert client.result(handle, timeout=30) == list(range(100))
    received = of_type(client.history(workflow_id), ev.MessageReceived, name="item")
    assert [m.message_id for m in received] == sent
    assert [m.payload for m in received] == list(range(100))
    assert second.alive()
