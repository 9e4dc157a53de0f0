"""Playwright fixtures for the dashboard's browser tests: Debian's headless Chromium
(`/usr/bin/chromium`, installed by apt; Playwright never downloads a browser here) with
JavaScript disabled by default, since every dashboard page must work without it.

Every page a test visits (and every page a form lands on) is saved as a full-page PNG in
end2end/artifacts/screenshots/, named `<test>-<nn>-<tab>-<step>.png`. Nothing here sleeps: every
wait is Playwright's own wait for a navigation or an element, bounded by its timeout.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, BrowserContext, Locator, Page, Playwright, Response, sync_playwright

from harness import ARTIFACTS_DIR

CHROMIUM = Path(os.environ.get("HERALD_E2E_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SCREENSHOTS_DIR = ARTIFACTS_DIR / "screenshots"
# Playwright's deadline (ms) for one navigation or one element to appear.
BROWSER_TIMEOUT_MS = int(float(os.environ.get("HERALD_E2E_BROWSER_TIMEOUT", "30")) * 1000)
SESSION_COOKIE = "herald_session"


@pytest.fixture(scope="session")
def playwright_driver() -> Iterator[Playwright]:
    with sync_playwright() as pw:
        yield pw


@pytest.fixture(scope="session")
def chromium(playwright_driver: Playwright) -> Iterator[Browser]:
    """Debian's Chromium, headless. Fails with a clear message when it is not installed."""
    if not CHROMIUM.is_file():
        pytest.fail(f"{CHROMIUM} is missing: install Debian's chromium (apt-get install chromium)")
    browser = playwright_driver.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
    try:
        yield browser
    finally:
        browser.close()


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_")[:80]


class Tab:
    """One browser context (its own cookies) with one page, for one user of the dashboard. Each
    visit and each form submission saves a screenshot."""

    def __init__(self, tabs: Tabs, label: str, context: BrowserContext):
        self._tabs = tabs
        self.label = label
        self.context = context
        self.page: Page = context.new_page()

    # -- seeing --------------------------------------------------------------------------------

    def shot(self, step: str) -> Path:
        return self._tabs.screenshot(self.page, self.label, step)

    def goto(self, path: str, step: str) -> Response:
        """Load `path` (following redirects) and save a screenshot; return the final response."""
        response = self.page.goto(path, wait_until="load")
        assert response is not None, f"no response for {path}"
        self.shot(step)
        return response

    def submit(self, button: Locator, step: str) -> Response:
        """Click a submit button and wait for the page the form lands on (after the server's
        redirect); save a screenshot and return that page's response."""
        with self.page.expect_navigation(wait_until="load") as navigation:
            button.click()
        response = navigation.value
        assert response is not None, f"the click on {button} led nowhere"
        self.shot(step)
        return response

    @property
    def path(self) -> str:
        """The current URL's path and query."""
        url = self.page.url
        return url[len(self._tabs.base_url) :] if url.startswith(self._tabs.base_url) else url

    def html(self) -> str:
        return self.page.content()

    def main_text(self) -> str:
        return self.page.locator("main").inner_text()

    def alerts(self) -> list[str]:
        return [t.strip() for t in self.page.locator('[role="alert"]').all_inner_texts()]

    def notices(self) -> list[str]:
        return [t.strip() for t in self.page.locator('[role="status"]').all_inner_texts()]

    def session_cookie(self) -> dict[str, Any] | None:
        for cookie in self.context.cookies():
            if cookie["name"] == SESSION_COOKIE:
                return dict(cookie)
        return None

    # -- doing ---------------------------------------------------------------------------------

    def login(self, username: str, password: str, step: str = "login") -> Response:
        self.goto("/login", f"{step}-form")
        form = self.page.locator("form", has=self.page.locator('input[name="password"]'))
        form.locator('input[name="username"]').fill(username)
        form.locator('input[name="password"]').fill(password)
        return self.submit(form.get_by_role("button", name="Log in"), f"{step}-done")


class Tabs:
    """Opens tabs for one test; closes them at its end."""

    def __init__(self, browser: Browser, base_url: str, test_name: str):
        self.browser = browser
        self.base_url = base_url.rstrip("/")
        self.test_name = _slug(test_name)
        self._contexts: list[BrowserContext] = []
        self._count = 0
        for old in SCREENSHOTS_DIR.glob(f"{self.test_name}-*.png"):  # a previous run's
            old.unlink(missing_ok=True)

    def new(self, label: str, *, javascript: bool = False) -> Tab:
        context = self.browser.new_context(
            base_url=self.base_url,
            java_script_enabled=javascript,
            viewport={"width": 1280, "height": 800},
        )
        context.set_default_timeout(BROWSER_TIMEOUT_MS)
        context.set_default_navigation_timeout(BROWSER_TIMEOUT_MS)
        self._contexts.append(context)
        return Tab(self, _slug(label), context)

    def screenshot(self, page: Page, label: str, step: str) -> Path:
        self._count += 1
        SCREENSHOTS_DIR.mkdir(parents=True, exist_ok=True)
        path = SCREENSHOTS_DIR / f"{self.test_name}-{self._count:02d}-{label}-{_slug(step)}.png"
        page.screenshot(path=str(path), full_page=True)
        return path

    def close(self) -> None:
        for context in self._contexts:
            try:
                context.close()
            except Exception:  # noqa: BLE001 - a context that is already gone is closed enough
                pass
        self._contexts.clear()


def open_tabs(browser: Browser, base_url: str, request: pytest.FixtureRequest) -> Iterator[Tabs]:
    """Tabs for the requesting test (use from a fixture that knows the server's base URL)."""
    tabs = Tabs(browser, base_url, request.node.name)
    try:
        yield tabs
    finally:
        tabs.close()
