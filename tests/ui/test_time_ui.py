"""Times a person can read, in a browser in New York (``timezone_id``): one setting
(UTC, local, relative) governs every time shown and every time input, each input
names its zone, and typing the time the list shows into "Created from" finds the run,
whichever the setting. Full timestamps, to the millisecond, on hover and in History."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from ._stack import UiStack
from .conftest import shoot, sign_in
from .test_browser import expect_text

pytestmark = pytest.mark.timeout(120)

NEW_YORK = "America/New_York"
FULL = r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d{3} (UTC|UTC[+\u2212]\d{2}:\d{2})$"


@pytest.fixture
def new_york(browser: Any) -> Iterator[Any]:
    ctx = browser.new_context(viewport={"width": 1280, "height": 860}, timezone_id=NEW_YORK)
    ctx.set_default_timeout(20_000)
    try:
        yield ctx
    finally:
        ctx.close()


def _choose(page: Any, mode: str, ready: str) -> None:
    with page.expect_navigation():
        page.select_option("#time-mode", mode)
    page.wait_for_selector(ready)


def _set_mode(page: Any, mode: str) -> None:
    _choose(page, mode, "#runs-body tr[data-workflow-id]")


def _shown(page: Any, workflow_id: str) -> str:
    text: str = page.locator(f"tr[data-workflow-id='{workflow_id}'] td.c-created").text_content()
    return text


def _filter_from(page: Any, value: str) -> list[str]:
    """Filter by "Created from" = ``value`` and return the workflow ids listed."""
    page.fill("#f-since", value)
    page.click("#filters button[type=submit]")
    page.wait_for_function(
        "() => location.search.includes('since=') &&"
        " document.getElementById('runs-table').dataset.shown === location.search"
    )
    ids: list[str] = page.locator("#runs-body tr[data-workflow-id]").evaluate_all(
        "rs => rs.map(r => r.dataset.workflowId)"
    )
    return ids


def _minute(text: str) -> str:
    """``2026-01-02 03:04:05 …`` as a datetime-local value for its minute."""
    match = re.match(r"^(\d{4}-\d{2}-\d{2}) (\d{2}:\d{2}):\d{2}", text)
    assert match, text
    return f"{match.group(1)}T{match.group(2)}"


def test_the_created_filter_finds_what_the_list_shows_in_new_york(
    new_york: Any, stack: UiStack
) -> None:
    stack.start("tz-1", ticket="TZ-1")
    stack.wait_status("tz-1", "completed")
    created = float(stack.run("tz-1")["created_at"])  # type: ignore[arg-type]
    page = sign_in(new_york, stack, stack.admin)
    page.wait_for_selector("tr[data-workflow-id='tz-1']")
    assert page.evaluate("Intl.DateTimeFormat().resolvedOptions().timeZone") == NEW_YORK

    # UTC, the default: shown and typed in UTC, and the inputs say so.
    utc = dt.datetime.fromtimestamp(created, dt.UTC)
    assert _shown(page, "tz-1") == utc.strftime("%Y-%m-%d %H:%M:%S UTC")
    assert page.locator("label[for='f-since']").text_content() == "Created from (UTC)"
    title = page.locator("tr[data-workflow-id='tz-1'] td.c-created time").get_attribute("title")
    assert re.match(FULL, title or ""), title
    minute = _minute(_shown(page, "tz-1"))
    assert "tz-1" in _filter_from(page, minute)
    later = (utc + dt.timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M")
    assert "tz-1" not in _filter_from(page, later)

    # Local: New York's time with its offset, typed in New York's time.
    page.click("#filters button[type=reset]")
    _set_mode(page, "local")
    local = dt.datetime.fromtimestamp(created, ZoneInfo(NEW_YORK))
    offset = local.strftime("%z")
    shown = _shown(page, "tz-1")
    assert shown == local.strftime(
        "%Y-%m-%d %H:%M:%S "
    ) + f"UTC{offset[0]}{offset[1:3]}:{offset[3:]}".replace("-", "\u2212")
    assert page.locator("label[for='f-since']").text_content() == f"Created from ({NEW_YORK})"
    assert page.text_content("#time-zone") == NEW_YORK
    assert "tz-1" in _filter_from(page, _minute(shown))
    # The URL keeps the instant: the same link means the same runs in every zone.
    since = re.search(r"since=([\d.]+)", page.url)
    assert since and abs(float(since.group(1)) - (created - created % 60)) < 1
    shoot(page, "time-setting")

    # Relative: "… ago", the full time on hover; inputs in local time.
    _set_mode(page, "relative")
    assert re.match(r"^\d+ (s|min) ago$|^just now$", _shown(page, "tz-1")), _shown(page, "tz-1")
    hover = page.locator("tr[data-workflow-id='tz-1'] td.c-created time").get_attribute("title")
    assert re.match(FULL, hover or "") and "UTC\u22120" in (hover or ""), hover
    assert page.input_value("#f-since") == _minute(shown)  # restored from the URL, local
    assert page.errors == []


def test_every_time_follows_the_setting_and_history_has_milliseconds(
    new_york: Any, stack: UiStack
) -> None:
    stack.start("tz-2", ticket="TZ-2")
    stack.wait_status("tz-2", "completed")
    page = sign_in(new_york, stack, stack.admin, "/run?id=tz-2")
    page.wait_for_selector(".tl-row")
    _choose(page, "local", ".tl-row")
    started = page.locator("#run-facts time").first.text_content()
    assert re.search(r"UTC\u22120[45]:00$", started), started
    page.click("#tab-history")
    stamps = page.locator("#hist-body td.ts").all_text_contents()
    assert stamps and all(re.match(FULL, s) for s in stamps), stamps[:3]
    assert len(set(stamps)) > 1  # events a second apart or less still read apart
    page.goto(f"{stack.url}/audit")
    page.wait_for_selector("#audit-body tr[data-action] time")
    assert "UTC\u22120" in page.locator("#audit-body time").first.text_content()
    _choose(page, "utc", "#audit-body tr[data-action] time")
    expect_text(page, "#audit-body time", "UTC$")
    assert page.errors == []
