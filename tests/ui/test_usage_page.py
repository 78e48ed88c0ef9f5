"""Model usage in the browser: per-step tokens and cost on the timeline and in the
checkpoint inspector (what each attempt of a retried model step cost), and the Usage
page (totals, the chart over time, the groups, the keys' budgets), against a real
server and real workers whose model calls go through the gateway into the ledger."""

from __future__ import annotations

import re
from typing import Any

import pytest

from ._stack import UiStack
from .conftest import shoot, sign_in

pytestmark = pytest.mark.timeout(120)


def _asked(stack: UiStack) -> str:
    """The run of ``ask`` both tests read (started by whichever runs first)."""
    with stack.api(stack.admin) as api:
        found = api.get("/api/v1/runs/usage-1")
    if found.status_code == 404:
        stack.start("usage-1", workflow="ask", question="the invoice was charged twice")
    stack.wait_status("usage-1", "completed")
    return str(stack.run("usage-1")["run_id"])


def test_the_timeline_and_inspector_show_each_attempts_model_calls(
    context: Any, stack: UiStack
) -> None:
    _asked(stack)
    page = sign_in(context, stack, stack.admin, "/run?id=usage-1")
    row = page.locator(".tl-row", has=page.locator(".tl-label", has_text=re.compile("^ask_model")))
    mark = row.locator(".usage-mark")
    mark.wait_for()
    assert re.search(r"\d+ tok · \$0", mark.text_content() or "")
    assert "2 calls" in (mark.get_attribute("title") or "")
    row.click()
    page.wait_for_selector("#insp-usage")
    assert "Model calls: 2 calls" in page.text_content("#insp-usage")
    attempts = page.locator("#insp-attempts tbody tr")
    assert attempts.count() == 2
    for i in range(2):
        shown = attempts.nth(i).locator(".attempt-usage")
        shown.wait_for()
        assert re.search(r"^1 call · \d+ tokens · \$", shown.text_content() or "")
    assert "cut off" in attempts.nth(0).text_content()  # the failed attempt's own cost
    shoot(page, "inspector-usage")
    assert page.errors == []


def test_the_usage_page_shows_totals_a_chart_groups_and_keys(context: Any, stack: UiStack) -> None:
    run_id = _asked(stack)
    stack.token("team-key", "gateway.use")
    page = sign_in(context, stack, stack.admin, "/usage")
    page.wait_for_selector("#usage-groups-body tr[data-key]")
    assert page.locator("nav a[href='/usage']").count() == 1
    assert int(page.text_content("#usage-calls b") or "0") >= 2
    assert page.text_content("#usage-cost b").startswith("$")
    assert "keepgoing-scripted-1" in page.text_content("#usage-groups-body")
    assert page.locator("#usage-chart .col[data-value]").count() >= 1
    assert "team-key" in page.text_content("#usage-keys-body")
    page.select_option("#u-group", "run")
    page.click("#usage-form button[type=submit]")
    link = page.locator(f"#usage-groups-body tr[data-key='{run_id}'] a")
    link.wait_for()
    assert "ask" in link.text_content()
    shoot(page, "usage")
    link.click()
    page.wait_for_selector(".tl-row")
    assert "usage-1" in page.text_content("#run-title")
    assert page.errors == []


def test_a_token_without_gateway_read_sees_no_usage(context: Any, stack: UiStack) -> None:
    reader = stack.token("runs-only", "runs.read")
    page = sign_in(context, stack, reader, "/usage")
    page.wait_for_selector("#usage-error:not([hidden])")
    assert "gateway.read" in page.text_content("#usage-error")
    assert page.locator("nav a[href='/usage']").count() == 0
