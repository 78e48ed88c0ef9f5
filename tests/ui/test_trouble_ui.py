"""The UI shows trouble first, in a real browser against a real server and workers: a
run with a worker loss and 429 retries is marked in the runs list and found by its
filter; the run page's problems strip and its `n` key go through each problem, worker
losses first, as replay's jump does; a run waiting for review is a state with a banner
that links to the decision, and the decision shows on the step; a killed worker leaves
the live workers within one heartbeat deadline and its replacement appears.

The tests run in file order and share one server: the troubled run the first test
makes is the one the others open.
"""

from __future__ import annotations

import json
import os
import re
import signal
from typing import Any

import pytest

from keepgoing._store.lost_workers import HEARTBEAT_DEADLINE
from keepgoing._store.trouble import is_rate_limited

from ._stack import UiStack, wait_until
from .conftest import shoot, sign_in
from .test_browser import _alive, expect_text, step_row

pytestmark = pytest.mark.timeout(150)

SHARED: dict[str, str] = {}
STATES = (
    "completed",
    "error",
    "non_retryable",
    "rate_limited",
    "timeout",
    "worker_lost",
    "released",
    "uncertain",
)


def _troubled(stack: UiStack, workflow_id: str, ticket: str) -> None:
    """A run with two 429 retries and a worker SIGKILLed mid-step, retried elsewhere."""
    stack.start(workflow_id, workflow="troubled", ticket=ticket)
    holding = stack.root / f"holding-{ticket}"
    wait_until(holding.exists, 60, f"{ticket}'s step to be held")
    victim = int(holding.read_text())
    os.kill(victim, signal.SIGKILL)
    wait_until(lambda: not _alive(victim), 30, "the worker to die")
    stack.start_ui_worker(f"worker-after-{ticket}")  # two workers again
    stack.wait_status(workflow_id, "completed", 60)


def test_a_run_with_a_worker_loss_is_marked_in_the_list_and_found_by_its_filter(
    context: Any, stack: UiStack
) -> None:
    _troubled(stack, "trb-1", "TRB-1")
    stack.start("calm-1", ticket="CALM-1")
    stack.wait_status("calm-1", "completed")
    SHARED["troubled"] = "trb-1"
    page = sign_in(context, stack, stack.admin)
    row = page.locator("tr[data-workflow-id='trb-1']")
    row.wait_for()
    expect_text(page, "tr[data-workflow-id='trb-1'] .m-worker_lost", "worker lost \u00d71")
    assert "retried \u00d72" in row.locator(".m-retried").text_content()
    assert "rate-limited \u00d72" in row.locator(".m-rate_limited").text_content()
    assert page.locator("tr[data-workflow-id='calm-1'] .marker").count() == 0
    # The counts by trouble, and the filter they set.
    expect_text(page, "[data-trouble-count='worker_lost']", r"^[1-9]\d*$")
    page.select_option("#f-trouble", "worker_lost")
    page.click("#filters button[type=submit]")
    page.wait_for_function(
        "() => { const rs = [...document.querySelectorAll('#runs-body tr[data-workflow-id]')];"
        " return rs.length > 0 && rs.every(r => r.querySelector('.m-worker_lost')); }"
    )
    assert page.locator("tr[data-workflow-id='calm-1']").count() == 0
    assert "trouble=worker_lost" in page.url
    shoot(page, "runs-trouble")
    # The filter survives a reload (it is in the URL); the count button sets it too.
    page.reload()
    page.wait_for_selector("tr[data-workflow-id='trb-1']")
    assert page.input_value("#f-trouble") == "worker_lost"
    page.click("#filters button[type=reset]")
    page.click("button[data-trouble='rate_limited']")
    page.wait_for_function(
        "() => { const rs = [...document.querySelectorAll('#runs-body tr[data-workflow-id]')];"
        " return rs.length > 0 && rs.every(r => r.querySelector('.m-rate_limited')); }"
    )
    assert page.errors == []


def test_the_problems_strip_and_its_key_go_through_each_problem(
    context: Any, stack: UiStack
) -> None:
    page = sign_in(context, stack, stack.admin, f"/run?id={SHARED['troubled']}")
    page.wait_for_selector("#problems:not([hidden]) li.problem")
    kinds = page.locator("#problem-list li").evaluate_all("ls => ls.map(l => l.dataset.kind)")
    assert kinds == ["worker_lost", "rate_limited"]  # the worker loss first
    assert "enrich" in page.locator("#problem-list li").first.text_content()
    # The next-problem key opens each in turn, attempts first in the inspector.
    page.keyboard.press("n")
    expect_text(page, "#inspector-title", "^enrich")
    first = page.locator("#insp-attempts tbody tr").first
    assert first.get_attribute("data-kind") == "worker_lost"
    order = page.evaluate(
        "() => document.getElementById('insp-attempts')"
        ".compareDocumentPosition(document.getElementById('insp-inputs'))"
    )
    assert order & 4, "the attempts come before the inputs"
    assert page.locator(".tl-row.selected .tl-label").text_content().startswith("enrich")
    shoot(page, "problems")
    page.keyboard.press("n")
    expect_text(page, "#inspector-title", "^lookup")
    assert page.locator("#insp-attempts tr[data-kind='rate_limited']").count() == 2
    expect_text(page, "#next-problem", r"Next problem \(2 of 2\)")
    page.keyboard.press("n")  # round again
    expect_text(page, "#inspector-title", "^enrich")
    page.keyboard.press("p")
    expect_text(page, "#inspector-title", "^lookup")
    page.locator("#problem-list li[data-kind='worker_lost'] button").click()
    expect_text(page, "#inspector-title", "^enrich")
    page.keyboard.press("n")
    expect_text(page, "#inspector-title", "^lookup")
    page.click("#tl-losses")  # the summary's "1 worker loss" leads to it
    expect_text(page, "#inspector-title", "^enrich")
    # A 429 retry and a worker loss look different: colour and shape.
    loss = step_row(page, "enrich").locator(".bar-worker_lost")
    limit = step_row(page, "lookup").locator(".bar-rate_limited").first
    style = (
        "b => { const s = getComputedStyle(b); return [s.backgroundColor, s.clipPath, "
        "s.borderRadius]; }"
    )
    assert loss.evaluate(style) != limit.evaluate(style)
    assert loss.evaluate(style)[0] != limit.evaluate(style)[0]
    assert loss.evaluate(style)[1] != limit.evaluate(style)[1]
    assert "worker lost" in step_row(page, "enrich").locator(".bar-note").first.text_content()
    assert "429" in step_row(page, "lookup").locator(".bar-note").first.text_content()
    # A legend entry for every state, each drawn as its bars are.
    legend = page.locator("#tl-legend li").evaluate_all("ls => ls.map(l => l.dataset.state)")
    assert set(STATES) <= set(legend) and {"running", "wait"} <= set(legend)
    # An ended run takes no message; Compare with… leads to the diff with this run as A.
    assert page.locator("#send-box").is_hidden()
    assert page.get_attribute("#compare-link", "href") == f"/diff?a={SHARED['troubled']}"
    assert page.errors == []


def test_the_timeline_and_the_store_agree_on_what_a_rate_limit_is(
    context: Any, stack: UiStack
) -> None:
    cases = [
        ("agent.RateLimitedError", "retry later"),
        ("HTTPError", "429 Too Many Requests"),
        ("openai.RateLimitError", "Rate limit reached for gpt-4o"),
        ("HTTPError", "too many requests"),
        ("ValueError", "row 4290 is bad"),
        ("ValueError", "rate of 3 per limit"),
        ("TimeoutError", "no answer"),
    ]
    page = sign_in(context, stack, stack.admin, "/")
    # The page asks the server to fold a history with one failed attempt per case: the
    # timeline draws each attempt's kind as the server's fold names it.
    found = page.evaluate(
        """async (cases) => { const m = await import('/ui/static/model.js');
            const start = {type: 'WorkflowStarted', seq: 1, at: 1, workflow_name: 'w',
                workflow_id: 'w', run_id: 'r', input: {}, code_version: 'v'};
            const step = {type: 'TaskScheduled', seq: 2, at: 1, cmd: 1, name: 'call'};
            const failed = cases.map(([type, message], i) => ({type: 'TaskAttemptFailed',
                seq: 3 + i, at: 2 + i, cmd: 1, name: 'call', attempt: i + 1,
                error: {type, message}, reason: 'error', retry_at: 3 + i}));
            const model = await m.foldEvents([start, step, ...failed]);
            return model.steps[0].attempts.map((a) => a.kind); }""",
        cases,
    )
    from keepgoing._history.events import ErrorInfo  # noqa: PLC0415

    expected = [
        "rate_limited" if is_rate_limited(ErrorInfo(type=t, message=m)) else "error"
        for t, m in cases
    ]
    assert found == expected
    assert expected[:4] == ["rate_limited"] * 4 and expected[4:] == ["error"] * 3


def test_replay_jumps_to_the_worker_loss_first_then_the_429_retry(
    context: Any, stack: UiStack
) -> None:
    page = sign_in(context, stack, stack.admin, f"/replay?id={SHARED['troubled']}")
    page.wait_for_selector("#scrubber:not([hidden])")
    expect_text(page, "#to-retry", "^Jump to the worker loss$")
    page.click("#to-retry")
    expect_text(page, "#jump-note", "^Problem 1 of 2: worker lost .*: enrich")
    expect_text(page, "#inspector-title", "^enrich")
    assert step_row(page, "enrich").locator(".bar-worker_lost").count() == 1
    assert step_row(page, "enrich").locator(".bar-completed").count() == 1
    page.click("#to-retry")
    expect_text(page, "#inspector-title", "^lookup")
    expect_text(page, "#jump-note", "^Problem 2 of 2: lookup #1: rate-limited")
    assert page.locator("#insp-attempts tr[data-kind='rate_limited']").count() == 2
    page.click("#to-retry")  # and round again
    expect_text(page, "#jump-note", "^Problem 1 of 2")
    assert page.errors == []


def test_a_run_waiting_for_review_has_a_banner_and_the_decision_shows_on_the_step(
    context: Any, stack: UiStack
) -> None:
    stack.start("rev-ui-1", workflow="crm_update", customer="CUS-9", fields={"tier": "gold"})
    wait_until(lambda: stack.run("rev-ui-1").get("state") == "waiting_for_review", 60, "the review")
    assert stack.run("rev-ui-1")["status"] == "running"
    page = sign_in(context, stack, stack.admin, "/")
    row = page.locator("tr[data-workflow-id='rev-ui-1']")
    row.wait_for()
    assert row.get_attribute("data-state") == "waiting_for_review"
    assert row.locator(".badge").text_content() == "waiting for review"
    expect_text(page, "#nav-reviews", r"^[1-9]\d*$")  # the navigation counts it
    page.click("tr[data-workflow-id='rev-ui-1'] a.run-link")
    banner = page.locator("#review-banner")
    banner.wait_for()
    expect_text(page, "#run-title", "waiting for review")
    assert "push_record #1" in banner.text_content()
    run_id = stack.run("rev-ui-1")["run_id"]
    assert f"op-{run_id}-1" in banner.text_content()
    shoot(page, "review-banner")
    banner.locator("a.decide-link").click()
    page.wait_for_url(re.compile(r"/reviews#op-card-"))
    card = page.locator("article.review[data-workflow-id='rev-ui-1']")
    card.wait_for(timeout=30_000)
    assert card.get_attribute("id") == page.url.split("#", 1)[1]
    card.locator("textarea.review-result").fill('{"tier": "gold", "version": 4}')
    card.locator("input.review-reason").fill("the CRM shows version 4")
    card.locator("button[data-decision='approve']").click()
    expect_text(page, "#toast", "Sent approve")
    stack.wait_status("rev-ui-1", "completed")
    page.goto(f"{stack.url}/run?id=rev-ui-1")
    step_row(page, "push_record").click()
    expect_text(page, "#insp-review", "approved by user root: the CRM shows version 4")
    expect_text(page, "#inspector-title", "approved")
    assert json.loads(page.text_content("#insp-output")) == {"tier": "gold", "version": 4}
    assert page.locator("#review-banner").count() == 0
    shoot(page, "review-decided")
    assert page.errors == []


def test_a_killed_worker_leaves_the_live_list_and_its_replacement_appears(
    context: Any, stack: UiStack
) -> None:
    page = sign_in(context, stack, stack.admin, "/workers")
    page.wait_for_selector("#workers-body tr[data-worker]")
    doomed = stack.start_ui_worker("worker-doomed")
    with stack.api(stack.admin) as api:
        (mine,) = [
            w for w in api.get("/api/v1/workers").json()["workers"] if w["pid"] == doomed.proc.pid
        ]
    row = page.locator(f"#workers-body tr[data-worker='{mine['worker_id']}']")
    row.wait_for(timeout=10_000)  # listed as soon as it registers
    kill = row.locator("button.danger")
    if stack.offers("/api/v1/workers/{worker_id}/kill"):
        page.once("dialog", lambda d: d.accept())
        kill.click()
        reason = "worker killed from the UI by root: its process ended"
    else:
        os.kill(doomed.proc.pid, signal.SIGKILL)
        reason = "its process ended"
    wait_until(lambda: doomed.proc.poll() is not None, 30, "the worker to die")
    lost = page.locator(f"#lost-body tr[data-lost-worker='{mine['worker_id']}']")
    lost.wait_for(timeout=HEARTBEAT_DEADLINE * 1000)  # within one heartbeat deadline
    assert row.count() == 0
    assert reason in lost.locator(".why").text_content()
    assert lost.locator("button").count() == 0  # no Kill for a lost worker
    assert lost.locator("time").count() == 2
    with stack.api(stack.admin) as api:
        listed = api.get("/api/v1/workers").json()
        queues = {q["queue"]: q["workers"] for q in api.get("/api/v1/queues").json()["queues"]}
    assert mine["worker_id"] not in [w["worker_id"] for w in listed["workers"]]
    assert queues["default"] == len(listed["workers"])
    replacement = stack.start_ui_worker("worker-replacement")
    page.wait_for_function(
        "([pid]) => [...document.querySelectorAll('#workers-body tr')]"
        ".some(r => r.textContent.includes(' / ' + pid))",
        arg=[replacement.proc.pid],
        timeout=10_000,
    )
    shoot(page, "workers-lost")
    assert page.errors == []
