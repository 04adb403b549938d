"""The desk says its scripts did not load, instead of "Connecting…" for ever (issue 42): the
example project in production mode, its static files served by nothing (uvicorn alone, as
a reader trying production mode had it), then served (as a deployment's web server does)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.desk.browser import (
    CHROMIUM_ARGS,
    DESK,
    PASSWORD,
    Site,
    chromium,
    production_site,
    serve_static,
)

pytestmark = [pytest.mark.browser, pytest.mark.multiprocess, pytest.mark.timeout(240)]
NOTICE = "[data-desk-unloaded]"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Site]:
    with production_site(tmp_path) as site:
        site.add_staff("sam")
        site.add_staff("root", superuser=True)
        yield site


def open_desk(browser, site: Site, username: str, *, static: bool):
    context = browser.new_context()
    if static:
        serve_static(site, context)
    page = context.new_page()
    page.goto(f"{site.base}/admin/login/?next={DESK}")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url(f"**{DESK}")
    page.wait_for_load_state("load")
    return context, page


def test_the_desk_says_its_scripts_did_not_load(server: Site) -> None:
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium(), args=CHROMIUM_ARGS)
        try:
            # Nothing serves /static/: the notice is shown, in staff's words.
            context, page = open_desk(browser, server, "sam", static=False)
            assert page.is_visible(NOTICE)
            said = page.text_content(NOTICE) or ""
            assert "could not load its scripts" in said and "tell your administrator" in said
            assert "collectstatic" not in said  # the technical reason: superusers only
            context.close()

            context, page = open_desk(browser, server, "root", static=False)
            assert "collectstatic" in (page.text_content(NOTICE) or "")
            context.close()

            # Served: the scripts run, the notice is gone and the desk goes live.
            context, page = open_desk(browser, server, "sam", static=True)
            page.wait_for_selector("[data-live][data-state=live]", timeout=20_000)
            assert not page.is_visible(NOTICE)
            context.close()
        finally:
            browser.close()
