"""Browser tests: Playwright driving Debian's chromium against a real server and workers.

One browser per module, launched with the settings TOOLCHAIN.md names and
``HOME`` in a temporary folder, and stopped with the module: Playwright's sync
API holds an event loop on the main thread while it runs, and the tests after
these ones run event loops of their own. One server with two workers per
module. Each test opens its own browser context (fresh
cookies). Screenshots for docs/ui.md are written to docs/img/ by
:func:`shoot`.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import sync_playwright

from ._stack import UiStack

pytestmark = pytest.mark.integration

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
IMG = Path(__file__).resolve().parents[2] / "docs" / "img"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if not Path(CHROMIUM).exists():
        skip = pytest.mark.skip(reason=f"{CHROMIUM} is missing (apt-get install -y chromium)")
        for item in items:
            if "tests/ui/" in str(item.fspath).replace(os.sep, "/"):
                item.add_marker(skip)


@pytest.fixture(scope="session")
def browser_type_launch_args(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    home = tmp_path_factory.mktemp("chromium-home")
    env = {k: v for k, v in os.environ.items() if k != "HOME"}
    env["HOME"] = str(home)
    return {"executable_path": CHROMIUM, "headless": True, "args": ARGS, "env": env}


@pytest.fixture(scope="module")
def browser(browser_type_launch_args: dict[str, Any]) -> Iterator[Any]:
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(**browser_type_launch_args)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UiStack]:
    s = UiStack(tmp_path_factory.mktemp("ui"))
    try:
        s.admin = s.token("root", "admin")
        s.start_server()
        s.start_ui_worker("worker-a")
        s.start_ui_worker("worker-b")
        yield s
    finally:
        s.cleanup()


@pytest.fixture
def context(browser: Any) -> Iterator[Any]:
    ctx = browser.new_context(viewport={"width": 1280, "height": 860})
    ctx.set_default_timeout(20_000)
    try:
        yield ctx
    finally:
        ctx.close()


def sign_in(context: Any, stack: UiStack, token: str, path: str = "/") -> Any:
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(stack.url + path)
    page.fill("#token", token)
    page.click("form[action='/signin'] button[type=submit]")
    page.wait_for_load_state()
    page.errors = errors  # checked by tests that care: no script error on the page
    return page


def shoot(page: Any, name: str) -> None:
    """A screenshot for docs/ui.md (docs/img/<name>.png), when ``KEEPGOING_UI_SCREENSHOTS=1``
    (``make screenshots``); otherwise the page is still drawn to an image, and thrown away,
    so the test fails the same way if it cannot be."""
    if os.environ.get("KEEPGOING_UI_SCREENSHOTS") != "1":
        page.screenshot(full_page=False)
        return
    IMG.mkdir(parents=True, exist_ok=True)
    tmp = IMG / f".{name}.png"
    page.screenshot(path=str(tmp), full_page=False)
    shutil.move(tmp, IMG / f"{name}.png")
