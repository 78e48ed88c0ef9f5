"""Pages a person can use, in a real browser: every page at 390 px without the page
scrolling sideways (the runs list's status in view, long titles wrapped), an unknown
run said plainly with no action offered, the memory versions as a compact filtered
list with the compare panel and its diff in view, and the diff of two runs with a run
picker, "Compare with…" from a run, only the differences by default and the changed
fields marked."""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterator
from typing import Any

import pytest

from ._stack import UiStack
from .conftest import shoot, sign_in
from .test_browser import expect_text

pytestmark = pytest.mark.timeout(150)

LONG = "invoice-reconciliation-for-customer-" + "0123456789" * 8
PHONE = {"width": 390, "height": 844}


@pytest.fixture(scope="module")
def runs(stack: UiStack) -> dict[str, str]:
    """The runs and the volume the pages show: two support runs, one with a very long
    workflow id, and a journal whose volume has thirty versions."""
    stack.start("lay-a", ticket="LAY-A")
    stack.start("lay-b", ticket="LAY-B")
    stack.start(LONG, ticket="LAY-L")
    stack.start("lay-journal", workflow="journal", book="lay", days=30)
    for workflow_id in ("lay-a", "lay-b", LONG, "lay-journal"):
        stack.wait_status(workflow_id, "completed", 90)
    return {"a": "lay-a", "b": "lay-b", "long": LONG, "volume": "journal-lay"}


@pytest.fixture
def phone(browser: Any) -> Iterator[Any]:
    ctx = browser.new_context(viewport=PHONE, is_mobile=True, has_touch=True)
    ctx.set_default_timeout(20_000)
    try:
        yield ctx
    finally:
        ctx.close()


def _pages(names: dict[str, str]) -> list[tuple[str, str]]:
    q = urllib.parse.quote
    return [
        ("/", "#runs-body tr[data-workflow-id]"),
        (f"/run?id={q(names['a'])}", ".tl-row"),
        (f"/run?id={q(names['long'])}", ".tl-row"),
        ("/run?id=no-such-run", "#run-missing"),
        (f"/replay?id={q(names['a'])}", "#scrubber:not([hidden])"),
        ("/replay", "#src-recorded"),
        (f"/diff?a={q(names['a'])}&b={q(names['b'])}", "#diff-steps tbody tr"),
        (f"/diff?a={q(names['a'])}", "#picks li"),
        ("/memory", "a.volume-link"),
        (f"/memory/volume?name={q(names['volume'])}", "#versions-body tr[data-version]"),
        ("/reviews", "#reviews-body > *"),
        ("/workers", "#workers-body tr[data-worker]"),
        ("/audit", "#audit-body tr[data-action]"),
        ("/demo", "#demo-title"),
    ]


def test_no_page_is_wider_than_a_phone(phone: Any, stack: UiStack, runs: dict[str, str]) -> None:
    page = sign_in(phone, stack, stack.admin)
    wide = []
    for path, ready in _pages(runs):
        page.goto(stack.url + path)
        try:
            page.wait_for_selector(ready)
        except Exception as exc:
            raise AssertionError(f"{path}: {ready} never showed") from exc
        page.wait_for_load_state("networkidle")
        width = page.evaluate("document.documentElement.scrollWidth")
        if width > PHONE["width"]:
            culprits = page.evaluate(
                """(w) => [...document.querySelectorAll('body *')]
                    .filter(n => n.getBoundingClientRect().right > w + 1)
                    .filter(n => !n.closest('.scroll-x, .tl-view, pre, .sr-only'))
                    .slice(0, 3).map(n => n.tagName + '.' + n.className + '#' + n.id)""",
                PHONE["width"],
            )
            wide.append(f"{path}: {width}px wide ({culprits})")
    assert wide == [], "pages wider than the phone:\n" + "\n".join(wide)
    assert page.errors == []


def test_the_runs_list_on_a_phone_shows_each_status(
    phone: Any, stack: UiStack, runs: dict[str, str]
) -> None:
    page = sign_in(phone, stack, stack.admin)
    page.wait_for_selector(f"tr[data-workflow-id='{runs['a']}'] td.c-status .badge")
    edges = page.evaluate(
        """([a, long]) => {
            const box = (s) => document.querySelector(s).getBoundingClientRect();
            const status = box(`tr[data-workflow-id='${a}'] td.c-status .badge`);
            const link = box(`tr[data-workflow-id='${long}'] a.run-link`);
            return [status.left, status.right, link.right];
        }""",
        [runs["a"], runs["long"]],
    )
    assert edges[0] >= 0 and edges[1] <= PHONE["width"], edges  # the status is in view
    assert edges[2] <= PHONE["width"], edges  # a long id wraps
    page.locator("#runs-table").scroll_into_view_if_needed()
    shoot(page, "phone-runs")
    page.goto(f"{stack.url}/run?id={urllib.parse.quote(runs['long'])}")
    page.wait_for_selector(".tl-row")
    title = page.locator("#run-title").bounding_box()
    assert title is not None and title["x"] + title["width"] <= PHONE["width"]


def test_an_unknown_run_is_said_plainly_with_nothing_to_do_on_it(
    context: Any, stack: UiStack
) -> None:
    page = sign_in(context, stack, stack.admin, "/run?id=no-such-run")
    expect_text(page, "#run-missing", "no run has workflow id 'no-such-run'")
    expect_text(page, "#run-title", "No such run")
    for hidden in ("#actions", "#run-tabs", "#panel-timeline", "#problems"):
        assert page.locator(hidden).is_hidden(), hidden
    assert page.errors == []  # no uncaught error either


def test_memory_versions_are_a_compact_filtered_list_with_the_diff_in_view(
    context: Any, stack: UiStack, runs: dict[str, str]
) -> None:
    page = sign_in(context, stack, stack.admin, f"/memory/volume?name={runs['volume']}")
    page.wait_for_selector("#versions-body tr[data-version='30']")
    expect_text(page, "#versions-title", r"^Versions \(30\)$")
    height = page.evaluate("document.documentElement.scrollHeight")
    assert height < 2200, f"the page is {height}px tall for 30 versions"
    page.select_option("#v-file", "day-1.md")
    expect_text(page, "#versions-title", r"^Versions \(10 of 30\)$")
    page.fill("#v-filter", "step #5 ")
    expect_text(page, "#versions-title", r"^Versions \(1 of 30\)$")
    page.fill("#v-filter", "")
    page.select_option("#v-file", "")
    page.click("button.vs-previous[data-version='30']")
    expect_text(page, "#vol-diff-summary", "changed 1")
    expect_text(page, "#diff-title", r"Diff v29 → v30")
    diff = page.locator("#vol-diff").bounding_box()
    assert diff is not None and diff["y"] < 860, "the diff is below the fold"
    assert diff["x"] > 640, "the compare panel is beside the list"
    expect_text(page, "#compare-chosen", "v29 → v30")
    shoot(page, "volume-versions")
    page.check("input[data-version='3']")  # a third ticks out the oldest choice
    expect_text(page, "#compare-chosen", "v30 → v3|v3 → v30")
    assert page.errors == []


def test_diff_picks_a_run_shows_only_differences_and_marks_the_changed_fields(
    context: Any, stack: UiStack, runs: dict[str, str]
) -> None:
    page = sign_in(context, stack, stack.admin, f"/run?id={runs['a']}")
    page.wait_for_selector(".tl-row")
    page.click("#compare-link")
    pick = page.locator(f"#picks button.pick[data-workflow-id='{runs['b']}']")
    pick.wait_for()
    assert page.locator(f"#picks button.pick[data-workflow-id='{runs['a']}']").count() == 0
    assert page.is_checked("#only-diff")
    pick.click()
    page.wait_for_selector("#diff-steps tbody tr")
    assert page.input_value("#diff-b") == runs["b"]
    assert page.url.endswith(f"/diff?a={runs['a']}&b={runs['b']}")
    rows = page.locator("#diff-steps tbody tr")
    assert rows.count() == 3
    # Every step's inputs name the ticket: all three differ, each with the field marked.
    changed = page.locator("#diff-steps tr[data-differs='yes'] .field.changed[data-field='inputs']")
    assert changed.count() == 6
    assert page.locator("#diff-steps .field.changed[data-field='step']").count() == 0
    # Column B is not cut off at 1280 px.
    fits = page.evaluate(
        "() => { const t = document.getElementById('diff-steps');"
        " return t.scrollWidth <= t.parentElement.clientWidth + 1; }"
    )
    assert fits
    page.locator("#diff-steps").scroll_into_view_if_needed()
    shoot(page, "diff-picker")
    # Two runs with the same steps: the identical rows are hidden until asked for.
    page.fill("#diff-b", runs["a"])
    page.click("#diff-form button[type=submit]")
    expect_text(page, "#diff-summary", "^0 of 3 steps differ")
    assert page.locator("#diff-steps tbody tr:visible").count() == 0
    expect_text(page, "#diff-hidden", "3 identical steps hidden")
    page.uncheck("#only-diff")
    assert page.locator("#diff-steps tbody tr:visible").count() == 3
    # The picker suggests runs as one types.
    page.fill("#diff-b", "")
    page.type("#diff-b", "lay-")
    page.wait_for_function(
        "() => { const v = [...document.querySelectorAll('#run-options option')]"
        ".map(o => o.value); return v.includes('lay-a') && v.includes('lay-b')"
        " && v.every(x => x.startsWith('lay-')); }"
    )
    assert page.errors == []
