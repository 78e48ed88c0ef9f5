"""The demo page and the recorded run, in a browser, against a real ``keepgoing demo`` stack.

The stack is the demo's own (:class:`LocalStack` with the demo's routes): the
server with the UI in this process, the agent's group on the local backend, its
replicas real ``keepgoing worker`` processes. It offers one use case, defined
here, so the page's cards and Start buttons are driven without the use cases'
own code. Everything that touches the store runs on a thread of its own:
Playwright's sync API holds an event loop on the test's thread.
"""

from __future__ import annotations

import concurrent.futures
import re
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from keepgoing._demo import routes
from keepgoing._demo.digest import KILL_STEP, deploy_agent
from keepgoing._demo.record import recorded
from keepgoing._demo.stack import LocalStack
from keepgoing._demo.usecases import USE_CASES, DemoStack, Evidence, UseCase
from keepgoing._demo.usecases.holdback import lookups_of
from keepgoing._history import events as ev

from .conftest import shoot

pytestmark = pytest.mark.integration
T = TypeVar("T")

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


def _start_tiny(stack: DemoStack) -> str:
    source = stack.workdir / "tiny_case.py"
    source.write_text(TINY)
    worker = stack.deploy(source, "wf-tiny", shutdown_delay_seconds=1)
    handle = stack.client.trigger_workflow("tiny_case", {"n": 1}, task_queue=worker.task_queue)
    return str(handle.workflow_id)


def _tiny_headless(stack: DemoStack, say: object) -> Evidence:
    return Evidence("TNY-0001", (), True)


TINY_CASE = UseCase(
    "TNY-0001", "A tiny case", "Tests", "One step, to drive the card.", _start_tiny, _tiny_headless
)


def off_thread(work: Callable[[], T]) -> T:
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(work).result()


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    holder: dict[str, routes.DemoState] = {}

    def extra(app: Any) -> None:
        holder["state"] = routes.DemoState(stack, use_cases=(*USE_CASES, TINY_CASE))
        routes.install(app, holder["state"])

    stack = LocalStack(tmp_path_factory.mktemp("demo") / "demo", fast=True, extra=extra)

    def up() -> None:
        stack.start()
        holder["state"].worker = deploy_agent(stack)

    off_thread(up)
    try:
        yield stack
    finally:
        off_thread(stack.close)


def expect_text(page: Any, selector: str, pattern: str, timeout: float = 30_000) -> None:
    page.wait_for_function(
        "([s, p]) => { const n = document.querySelector(s);"
        " return n && new RegExp(p).test(n.textContent); }",
        arg=[selector, pattern],
        timeout=timeout,
    )


def open_page(context: Any, url: str) -> Any:
    page = context.new_page()
    page.errors = []
    page.on("pageerror", lambda exc: page.errors.append(str(exc)))
    page.goto(url)
    return page


def test_the_demo_page_offers_replay_live_run_kill_and_the_use_cases(
    context: Any, demo: LocalStack
) -> None:
    page = open_page(context, f"{demo.server_url}/demo")
    expect_text(page, "#demo-model", "Model: scripted: .*not a language model")
    assert page.locator("#replay-recorded").get_attribute("href") == (
        "/replay?recording=support-digest"
    )
    page.wait_for_selector("#start-live:not([disabled])")
    assert page.locator("#demo-kill").is_disabled()  # no live run yet
    card = page.locator(".use-case[data-key='TNY-0001']")
    card.wait_for()
    assert "TNY-0001 · Tests" in card.text_content()
    assert "A tiny case" in card.text_content()
    assert page.locator("nav a[href='/demo']").count() == 1
    assert page.errors == []
    card.evaluate("node => node.remove()")  # the README's screenshot: the demo's own cases
    shoot(page, "demo")


def _kill_from_the_page(page: Any, demo: LocalStack, workflow_id: str) -> bool:
    """Press Kill the worker until it lands while a step runs (between steps, and during
    the durable waits, no worker holds the run and the page says so). False when the
    run finished first (a fast run is short, and a loaded machine slow)."""
    status = page.locator("#live-status")
    while "Killed worker" not in (status.text_content() or ""):
        run = off_thread(lambda: demo.client.get_run(workflow_id))
        if run.status != "running":
            return False
        if not page.locator("#demo-kill").is_enabled():
            page.wait_for_timeout(50)  # the page refreshes its runs every 2 s
            continue
        # Press while a model call runs: a lookup the directory's limit let through
        # takes a millisecond, and a kill aimed at it lands after it has finished.
        if off_thread(lambda: demo._running_step(workflow_id, KILL_STEP)) is None:
            page.wait_for_timeout(20)
            continue
        answers = page.locator("#demo-kill").get_attribute("data-answers") or "0"
        page.click("#demo-kill")
        page.wait_for_function(  # the page has the kill API's answer to this press
            "([n]) => (document.querySelector('#demo-kill').dataset.answers || '0') !== n",
            arg=[answers],
        )
    return True


def test_start_a_live_run_then_kill_its_worker_from_the_page(
    context: Any, demo: LocalStack
) -> None:
    page = open_page(context, f"{demo.server_url}/demo")
    page.wait_for_selector("#start-live:not([disabled])")
    for _ in range(3):  # a run that ended before a kill landed: start another
        count = page.locator("#live-runs a.live-run").count()
        page.click("#start-live")
        expect_text(page, "#live-status", "^Started support_digest-")
        page.wait_for_function(
            "([n]) => document.querySelectorAll('#live-runs a.live-run').length > n",
            arg=[count],
        )
        workflow_id = page.locator("#live-runs a.live-run").last.text_content()
        if _kill_from_the_page(page, demo, workflow_id):
            break
    else:
        pytest.fail("three live runs ended before a kill landed mid-step")
    assert re.search(r"Killed worker \S+ during step #\d+", page.text_content("#live-status"))
    result = off_thread(lambda: demo.client.result(workflow_id, timeout=120))
    assert result["tickets"] == 16
    history = off_thread(lambda: demo.client.history(workflow_id))
    assert any(isinstance(e, ev.TaskAttemptFailed) and e.reason == "worker_lost" for e in history)
    page.goto(f"{demo.server_url}/run?id={workflow_id}")
    expect_text(page, "main", "completed")
    assert page.errors == []


def test_a_use_case_card_starts_its_scenario_and_opens_the_run(
    context: Any, demo: LocalStack
) -> None:
    page = open_page(context, f"{demo.server_url}/demo")
    page.locator("[data-start='TNY-0001']").click()
    page.wait_for_url(re.compile(r"/run\?id=tiny_case-"))
    workflow_id = page.url.split("id=", 1)[1]
    assert off_thread(lambda: demo.client.result(workflow_id, timeout=60)) == 2
    page.goto(f"{demo.server_url}/demo")
    page.locator(".use-case[data-key='TNY-0001'] a").wait_for()
    assert workflow_id in page.text_content(".use-case[data-key='TNY-0001']")


def test_the_held_back_card_runs_its_lookups_within_the_directory_quota(
    context: Any, demo: LocalStack
) -> None:
    page = open_page(context, f"{demo.server_url}/demo")
    card = page.locator(".use-case[data-key='DIR-0429']")
    card.wait_for()
    assert "Held back, not retried" in card.text_content()
    assert "Flow control" in card.text_content()
    page.locator("[data-start='DIR-0429']").click()
    page.wait_for_url(re.compile(r"/run\?id=DIR-0429-"))
    workflow_id = page.url.split("id=", 1)[1]
    assert off_thread(lambda: demo.client.result(workflow_id, timeout=120))["tickets"] == 8
    lookups = lookups_of(off_thread(lambda: demo.client.history(workflow_id)))
    assert lookups.lookups == 8 and lookups.held >= 4 and lookups.longest >= 1.5
    assert lookups.refused <= 1 and not lookups.failed
    expect_text(page, "main", "completed")
    assert page.errors == []


def test_the_recorded_run_replays_from_the_demo_page(context: Any, demo: LocalStack) -> None:
    recording = (
        Path(__file__).resolve().parents[2]
        / "src/keepgoing/_server/ui/static/recordings/support-digest.history.json"
    )
    assert recording.is_file(), "record it with `make record-demo`"
    page = open_page(context, f"{demo.server_url}/demo")
    page.click("#replay-recorded")
    page.wait_for_selector("#scrubber:not([hidden])")
    expect_text(page, "#replay-status", r"^Recorded run: support-digest: \d+ events")
    # The jump goes to the worker loss first, as the demo page promises ...
    expect_text(page, "#to-retry", "^Jump to the worker loss$")
    page.click("#to-retry")
    expect_text(page, "#jump-note", "^Problem 1 of \\d+: worker (lost|killed)")
    lost = page.locator("#insp-attempts tbody tr[data-kind='worker_lost']")
    assert lost.count() == 1
    assert page.locator("#insp-attempts tbody tr[data-kind='completed']").count() == 1
    # The customer lookups waited for the directory's rate limit: none was refused
    # with a 429 and retried (the recording's own check says so).
    refused = lookups_of(recorded()).refused
    # Play it to the end: the worker loss, the retried step on a new worker, the memory.
    page.select_option("#speed", "60")
    page.fill("#playhead", page.get_attribute("#playhead", "max"))
    page.dispatch_event("#playhead", "input")
    expect_text(page, "#playhead-text", "WorkflowCompleted")
    assert page.locator(".bar-worker_lost").count() >= 1
    if not refused:
        assert page.locator(".tl-row .bar-rate_limited").count() == 0
    assert page.locator(".tl-row").count() > 10
    expect_text(page, "#replay-memory-list", "support-digest v")
    assert page.errors == []
    shoot(page, "replay-recorded")
    # The replay page offers the recording first, from any server.
    page.goto(f"{demo.server_url}/replay")
    page.click("[data-recording='support-digest']")
    expect_text(page, "#replay-status", "^Recorded run: support-digest")


def test_the_demo_routes_refuse_bad_requests(demo: LocalStack) -> None:
    import httpx  # noqa: PLC0415

    with httpx.Client(base_url=demo.server_url, timeout=10) as http:
        before = http.get("/api/v1/demo").json()["live_runs"]
        unknown = http.post("/api/v1/demo/use-cases/NOPE-0000/start")
        assert unknown.status_code == 404 and unknown.json()["code"] == "use_case_not_found"
        long = http.post(f"/api/v1/demo/use-cases/{'X' * 500}/start")
        assert long.status_code == 404
        # Authentication is off, so the door refuses another site's page and a lying Host.
        other = http.post("/api/v1/demo/live", headers={"Origin": "https://evil.example"})
        assert other.status_code == 403, other.text
        lying = http.post("/api/v1/demo/live", headers={"Host": "evil.example"})
        assert lying.status_code in (400, 403, 421), lying.text
        assert http.get("/api/v1/demo").json()["live_runs"] == before  # none was started
