"""The Schedules page in a browser: next fire times, trigger, pause and unpause behind
the signed-in session (its CSRF token), recent actions linked to their runs."""

from __future__ import annotations

from typing import Any

import pytest

from ._stack import UiStack
from .conftest import shoot, sign_in

pytestmark = pytest.mark.timeout(120)


def _schedule(stack: UiStack) -> None:
    with stack.api(stack.admin) as api:
        if api.get("/api/v1/schedules/ui-tick").status_code == 404:
            made = api.post(
                "/api/v1/schedules",
                json={
                    "schedule_id": "ui-tick",
                    "workflow": "wide",
                    "input": {"n": 2},
                    "cron": "0 9 * * 1-5",
                    "timezone": "Europe/Paris",
                },
            )
            assert made.status_code == 200, made.text


def test_the_schedules_page_triggers_pauses_and_links_runs(context: Any, stack: UiStack) -> None:
    _schedule(stack)
    page = sign_in(context, stack, stack.admin, "/schedules")
    card = page.locator("article.schedule[data-schedule='ui-tick']")
    card.wait_for()
    assert page.locator("nav a[href='/schedules']").count() == 1
    assert card.locator(".next-fires li").count() == 5
    assert "cron 0 9 * * 1-5 (Europe/Paris)" in (card.text_content() or "")

    card.locator("button[data-action='trigger']").click()
    link = card.locator("tbody tr[data-status='started'] a")
    link.wait_for()
    assert (link.text_content() or "").startswith("ui-tick-")

    card.locator("button[data-action='pause']").click()
    page.wait_for_selector("article.schedule[data-schedule='ui-tick'][data-paused='true']")
    assert card.locator(".next-fires li").count() == 0
    card.locator("button[data-action='unpause']").click()
    page.wait_for_selector("article.schedule[data-schedule='ui-tick'][data-paused='false']")
    shoot(page, "schedules")
    href = link.get_attribute("href") or ""
    workflow_id = link.text_content() or ""
    assert href.startswith("/run?")
    page.goto(stack.url + href)
    page.wait_for_function(
        "id => (document.getElementById('run-title')?.textContent || '').includes(id)",
        arg=workflow_id,
    )
    assert page.errors == []


def test_a_reader_sees_schedules_but_no_buttons(context: Any, stack: UiStack) -> None:
    _schedule(stack)
    reader = stack.token("schedule-reader", "runs.read", "schedules.read")
    page = sign_in(context, stack, reader, "/schedules")
    card = page.locator("article.schedule[data-schedule='ui-tick']")
    card.wait_for()
    assert card.locator("button").count() == 0
    assert "cannot change schedules" in (card.text_content() or "")
