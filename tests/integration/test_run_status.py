"""Progress a run publishes (``keepgoing.set_status``), on real worker processes:
durable, replay-safe, read by ``Client.get_status`` (waiting for it if asked)."""

from __future__ import annotations

import pytest

import keepgoing
from keepgoing._history import events as ev

from ._support import Sandbox, Workers, of_type, wait_until

pytestmark = pytest.mark.integration


@pytest.mark.timeout(90)
def test_published_values_survive_a_sigkill_and_are_the_same_after_replay(
    kg: Sandbox, workers: Workers, client: keepgoing.Client
) -> None:
    app = kg.app("recovery")
    first = workers.start(app)
    handle = client.trigger_workflow("publishes", {"key": "p"}, workflow_id="pub")

    # The wait is woken by the commit that publishes the value.
    assert client.get_status("pub", "stage", wait=30) == "started"
    token = client.get_status("pub", "token")
    assert isinstance(token, str) and len(token) == 36
    wait_until(lambda: kg.effects("start", "held", "p"), 30, "the held step to start")
    first.kill()

    workers.start(app)
    kg.release("release-p")
    assert client.result(handle, timeout=60) == token  # the replay made the same uuid
    assert client.get_status("pub", "token") == token
    assert client.get_status("pub", "stage") == "done"
    published = [(e.name, e.value) for e in of_type(client.history("pub"), ev.StatusSet)]
    assert published == [("stage", "started"), ("token", token), ("stage", "done")]
    assert client.get_status("pub", "never") is None
    with pytest.raises(TimeoutError, match="never"):
        client.get_status("pub", "never", wait=0.2)  # an ended run publishes no more


@pytest.mark.timeout(60)
def test_values_no_store_can_carry_get_a_clear_error(
    kg: Sandbox, workers: Workers, client: keepgoing.Client
) -> None:
    workers.start(kg.app("recovery"))
    problems = client.trigger_workflow(
        "publishes_badly", {"key": "b"}, workflow_id="bad", wait=True, timeout=30
    )

    assert len(problems) == 7
    assert "NaN" in problems[0] or "nan" in problems[0].lower()
    assert all("status" in p or "set_status" in p for p in problems), problems
    assert not of_type(client.history("bad"), ev.StatusSet)
    with pytest.raises(keepgoing.RunNotFoundError):
        client.get_status("no-such-run", "x")
    with pytest.raises(ValueError, match="key"):
        client.get_status("bad", "")
    with pytest.raises(keepgoing.InvalidRequestError, match="wait"):
        client.get_status("bad", "x", wait=-1)
