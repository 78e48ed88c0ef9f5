"""*Fork from here* in the inspector, in a real browser: the input editor checks its
JSON, the fork is made through the session, and the Diff page shows the pair."""

from __future__ import annotations

import re
from typing import Any

import pytest

from ._stack import UiStack, wait_until
from .conftest import sign_in

pytestmark = pytest.mark.timeout(120)


def _row(page: Any, name: str) -> Any:
    return page.locator(".tl-row", has=page.locator(".tl-label", has_text=re.compile(f"^{name}")))


def test_fork_from_here_makes_a_fork_and_the_diff_page_shows_the_two(
    context: Any, stack: UiStack
) -> None:
    stack.start("fork-src", ticket="F-1")
    stack.wait_status("fork-src", "completed")
    page = sign_in(context, stack, stack.admin, "/run?id=fork-src")
    _row(page, "enrich").click()
    page.click("#fork-here summary")
    page.fill("#fork-input", "{nope")
    page.wait_for_selector("#fork-problem:has-text('Not JSON')")
    assert page.locator("#fork-submit").is_disabled()
    assert "resume-here" not in page.content()  # a completed run is not resumed
    # A new ticket changes step 1's argument (intake(ticket)): the fork is refused,
    # said in the form, before enrich runs again.
    page.fill("#fork-input", '{"ticket": "F-2"}')
    page.click("#fork-submit")
    page.wait_for_selector("#fork-problem:has-text('fork refused')")
    assert page.text_content("#fork-problem") == (
        "fork refused: step 1 intake was recorded with ticket='F-1', the new input "
        "schedules ticket='F-2'; fork from step 1 or earlier"
    )
    assert page.locator("#fork-submit").is_enabled()
    # The same ticket with a new hold only changes the steps from enrich on.
    page.fill("#fork-input", '{"ticket": "F-1", "hold": false}')
    page.click("#fork-submit")
    link = page.wait_for_selector("#fork-link")
    fork_id = link.text_content() or ""
    assert fork_id.startswith("fork-src-fork-")
    stack.wait_status(fork_id, "completed")
    page.click("#fork-diff")
    page.wait_for_selector("#diff-steps tbody tr", state="attached")
    assert page.locator("#diff-steps tbody tr").count() == 3
    assert "F-1" in page.text_content("#diff-input-a")
    assert "hold" in page.text_content("#diff-input-b")
    assert page.errors == []


def test_resume_from_here_sends_a_cancelled_run_back_into_its_step(
    context: Any, stack: UiStack
) -> None:
    stack.start("resume-ui", ticket="R-1", hold=True)
    wait_until((stack.root / "holding-R-1").exists, 30, "enrich to be held")
    with stack.api(stack.admin) as api:
        assert api.post("/api/v1/runs/resume-ui/cancel", json={}).status_code == 202
    stack.wait_status("resume-ui", "cancelled")
    page = sign_in(context, stack, stack.admin, "/run?id=resume-ui")
    _row(page, "enrich").click()
    page.click("#resume-here")
    page.wait_for_url(re.compile(r"/run\?id=resume-ui"))
    stack.release("R-1")
    stack.wait_status("resume-ui", "completed")
    assert page.errors == []


def test_the_lineage_tab_links_a_fork_to_its_origin_and_back(context: Any, stack: UiStack) -> None:
    stack.start("line-src", ticket="L-1")
    stack.wait_status("line-src", "completed")
    with stack.api(stack.admin) as api:
        made = api.post(
            "/api/v1/runs/line-src/fork", json={"from_step": 2, "workflow_id": "line-fork"}
        )
        assert made.status_code < 300, made.text
    stack.wait_status("line-fork", "completed")
    page = sign_in(context, stack, stack.admin, "/run?id=line-fork")
    page.click("#tab-lineage")
    origin = page.wait_for_selector("#lineage-recovery li[data-kind=fork] a")
    row = page.text_content("#lineage-recovery") or ""
    assert "Forked from line-src from step #2" in row
    origin.click()
    page.wait_for_url(re.compile(r"/run\?id=line-src"))
    page.click("#tab-lineage")
    back = page.wait_for_selector("#lineage-recovery li[data-kind=fork] a")
    assert back.text_content() == "line-fork"
    assert "Fork line-fork from step #2" in (page.text_content("#lineage-recovery") or "")
    assert page.errors == []


def test_the_run_page_shows_the_newest_status_values(context: Any, stack: UiStack) -> None:
    stack.start("progress-ui", workflow="progress", ticket="P-1")
    stack.wait_status("progress-ui", "completed")
    page = sign_in(context, stack, stack.admin, "/run?id=progress-ui")
    shown = page.wait_for_selector("#run-status")
    text = shown.text_content() or ""
    assert "stage" in text and "routed" in text and "intake" not in text
    assert '"done": 1' in text or '"done":1' in text
    assert page.errors == []


def test_an_attempt_not_retried_has_a_style_of_its_own_on_the_timeline(
    context: Any, stack: UiStack
) -> None:
    stack.start("strict-1", workflow="strict", ticket="S-1")
    stack.wait_status("strict-1", "failed")
    page = sign_in(context, stack, stack.admin, "/run?id=strict-1")
    row = _row(page, "validate")
    stopped = row.locator(".bar-non_retryable")
    stopped.wait_for()
    # The timeline redraws as the run's updates arrive: read the bars once it has settled.
    page.wait_for_load_state("networkidle")
    retried = row.locator(".bar-error")
    assert (stopped.count(), retried.count()) == (1, 1)
    style = (
        "b => { const s = getComputedStyle(b); return [s.backgroundColor, "
        "s.borderRightWidth, s.borderRightStyle]; }"
    )
    mine, theirs = stopped.evaluate(style), retried.evaluate(style)
    assert mine[0] != theirs[0] and mine[0] != "rgba(0, 0, 0, 0)"  # a colour of its own
    assert mine[1:] == ["4px", "solid"] and theirs[2] == "none"  # and a stop at its end
    assert stopped.text_content() == "\u2298 ValueError, not retried"
    assert "ValueError, not retried" in row.locator(".bar-note.k-non_retryable").text_content()
    legend = page.locator("#tl-legend li[data-state='non_retryable']")
    assert "not retried" in legend.text_content()
    row.click()
    badge = page.locator("#insp-attempts .badge.o-non_retryable")
    assert badge.text_content() == "not retried"
    assert "give_up_on" in page.text_content("#insp-attempts")
    assert page.errors == []
