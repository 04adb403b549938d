"""The desk's browser harness: the example project as shipped, in production mode, and staff
in Debian's Chromium (Playwright).

Production mode is the cluster of the multiprocess tests (uvicorn with DEBUG off, a Celery
worker, PostgreSQL, Redis for the broker and the live channels). The only difference from a
deployment is network routing: a deployment's web server serves ``collectstatic``'s output
at ``/static/``; here the browser context answers ``/static/`` from that same directory
(``BrowserContext.route``), since uvicorn serves no static files.

Each :class:`Staff` is one person: a browser context of their own (their own cookies, the
notification permission granted as a person granting it would), signed in through the
admin's login form. The page records every desktop notification it raises (the Notification
API, wrapped before the page's scripts run; the real one is still called).

Screenshots for the docs (:func:`screenshot`) go to ``var/test-artifacts/desk/``; with
``POPPY_DOCS_SCREENSHOTS=1`` they are also copied into ``docs/img/`` under the same names,
so ``make test`` leaves the checkout as it found it and refreshing the docs' pictures is one
command (docs/contributing.md).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import mimetypes
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.agents import PersonalAgent, company_messages, unique
from tests.multiprocess.cluster import ROOT, Cluster, cluster

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ARTIFACTS = ROOT / "var" / "test-artifacts" / "desk"
DOCS_IMG = ROOT / "docs" / "img"
#: Set to 1 to copy the screenshots into docs/img (the docs' pictures).
DOCS_SCREENSHOTS = "POPPY_DOCS_SCREENSHOTS"
PASSWORD = "desk-test-password"
DESK = "/admin/poppy_django/conversation/desk/"
SETTLED = ".poppy-request[data-state=settled]"
#: Runs before the page's scripts: every notification raised is recorded for the test.
RECORD_NOTIFICATIONS = """
(() => {
  const Real = window.Notification;
  if (!Real) { return; }
  window.__poppyNotifications = [];
  function Recorded(title, options) {
    window.__poppyNotifications.push({ title: title, body: (options || {}).body || "",
                                       tag: (options || {}).tag || "" });
    return new Real(title, options);
  }
  Object.defineProperty(Recorded, "permission", { get: () => Real.permission });
  Recorded.requestPermission = (...args) => Real.requestPermission(...args);
  window.Notification = Recorded;
})();
"""
#: Runs before the page's scripts: every tone the page's WebAudio makes is counted.
RECORD_TONES = """
(() => {
  window.__poppyTones = 0;
  const Context = window.AudioContext || window.webkitAudioContext;
  if (!Context) { return; }
  const make = Context.prototype.createOscillator;
  Context.prototype.createOscillator = function () {
    window.__poppyTones += 1;
    return make.call(this);
  };
})();
"""


def chromium() -> str:
    for candidate in ("chromium", "chromium-browser"):
        found = shutil.which(candidate)
        if found:
            return found
    if Path("/usr/bin/chromium").exists():
        return "/usr/bin/chromium"
    pytest.skip("Chromium is not installed (scripts/ensure-browser.sh: apt-get install chromium)")


#: The operator's shell a :class:`Site` keeps open: each line it reads is a JSON-encoded
#: snippet of Python, run as ``manage.py shell -c`` runs one (autocommit, its connections
#: let go after it as after a request); it answers one line, ``done`` and what the snippet
#: printed, or ``failed`` and its traceback (both JSON).
_KEPT_SHELL = """
import contextlib, io, json, sys, traceback
from django.db import close_old_connections
for line in sys.stdin:
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            exec(json.loads(line), {})
        answer = "done " + json.dumps(printed.getvalue())
    except Exception:
        answer = "failed " + json.dumps(traceback.format_exc())
    close_old_connections()
    print(answer, flush=True)
"""


@dataclass
class Site:
    """The example project running in production mode."""

    cluster: Cluster
    base: str
    static_root: Path
    _shell: subprocess.Popen[str] | None = field(default=None, repr=False)

    def shell(self, code: str) -> str:
        """What ``code`` printed, run in the site's environment as ``manage.py shell -c``
        runs it, in a shell kept open for the site: a new ``manage.py`` process took a few
        seconds to start each time, polled in loops by the tests."""
        if self._shell is None:
            argv = [sys.executable, str(ROOT / "manage.py"), "shell", "-v", "0", "-c"]
            self._shell = subprocess.Popen(
                [*argv, _KEPT_SHELL],
                env=self.cluster.env,
                cwd=ROOT,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
        assert self._shell.stdin is not None and self._shell.stdout is not None
        self._shell.stdin.write(json.dumps(code) + "\n")
        self._shell.stdin.flush()
        while True:  # past anything the shell itself prints
            line = self._shell.stdout.readline()
            if not line:
                raise RuntimeError(f"the site's shell exited ({self._shell.wait()})")
            kind, _, answer = line.rstrip("\n").partition(" ")
            if kind == "done":
                return str(json.loads(answer))
            if kind == "failed":
                raise RuntimeError(
                    f"the site's shell failed running:\n{code}\n{json.loads(answer)}"
                )

    def close(self) -> None:
        if self._shell is not None:
            assert self._shell.stdin is not None
            self._shell.stdin.close()
            self._shell.wait(timeout=30)
            self._shell = None

    def add_staff(self, username: str, *, superuser: bool = False) -> None:
        """A staff account holding the desk permission (or a superuser)."""
        make = "create_superuser" if superuser else "create_user"
        self.shell(
            "from django.contrib.auth.models import Permission, User\n"
            f"u = User.objects.{make}('{username}', password='{PASSWORD}', is_staff=True)\n"
            "u.user_permissions.add(Permission.objects.get(codename='handle_conversations'))",
        )


#: collectstatic's output for this checkout, as the session's first site with the same
#: environment switches collected it (kept apart from that site's, which its tests may read
#: but nothing changes): each later site gets a copy, milliseconds where another
#: collectstatic took a manage.py process.
_collected: dict[tuple[tuple[str, str], ...], Path] = {}


def _collect_static(running: Cluster, env: dict[str, str] | None) -> None:
    """The site's ``STATIC_ROOT`` filled as a deployment's ``collectstatic`` fills it."""
    static_root = Path(running.env["POPPY_VAR_DIR"]) / "static"
    switches = tuple(sorted((env or {}).items()))
    if switches in _collected:
        shutil.copytree(_collected[switches], static_root)
        return
    running.manage("collectstatic", "--noinput", "-v0")
    kept = Path(tempfile.mkdtemp(prefix="poppy-collected-")) / "static"
    shutil.copytree(static_root, kept)
    atexit.register(shutil.rmtree, kept.parent, True)
    _collected[switches] = kept


@contextlib.contextmanager
def production_site(tmp: Path, env: dict[str, str] | None = None) -> Iterator[Site]:
    """The example project as shipped: uvicorn (DEBUG off), a Celery worker, PostgreSQL,
    Redis; its static files collected as a deployment collects them. ``env``: settings of
    the example project's environment for every process."""
    with cluster(tmp, env=env) as running:
        assert "REDIS_URL" in running.env and running.env.get("DJANGO_DEBUG", "0") == "0"
        _collect_static(running, env)
        running.worker("worker")
        site = Site(running, running.web("web"), tmp / "static")
        try:
            yield site
        finally:
            site.close()


@contextlib.contextmanager
def launched() -> Iterator[Any]:
    """Debian's Chromium through Playwright, for a module's tests (skipped without them)."""
    sync_api = pytest.importorskip("playwright.sync_api")
    executable = chromium()
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def handed_off(site: Site, text: str, agent: PersonalAgent | None = None) -> tuple[str, Any]:
    """A personal agent says ``text``, gets the Company Agent's answer, asks for a person
    (queued: someone is on shift)."""
    agent = (agent or PersonalAgent(user_id=unique("desk-user"))).at(site.base)
    started = agent.post("", agent.message(text))
    assert started.status_code == 201, started.text
    conversation_id = started.json()["conversation_id"]
    agent.events_until(conversation_id, lambda events: len(company_messages(events)) == 1)
    asked = agent.post(f"/{conversation_id}/handoff", {})
    assert asked.json()["status"] == "queued", asked.text
    return conversation_id, agent


def serve_static(site: Site, context: Any) -> None:
    """Answer ``/static/`` from the collected files, as the deployment's web server would."""
    prefix = f"{site.base}/static/"

    def fulfil(route: Any) -> None:
        relative = route.request.url[len(prefix) :].split("?")[0]
        path = (site.static_root / relative).resolve()
        if site.static_root.resolve() not in path.parents or not path.is_file():
            route.fulfill(status=404, body="not found")
            return
        kind = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        route.fulfill(status=200, body=path.read_bytes(), content_type=kind)

    context.route(f"{prefix}**", fulfil)


class Staff:
    """One person at the desk: a browser context of their own, signed in, one page."""

    def __init__(
        self, browser: Any, site: Site, username: str, *, width: int = 1440, height: int = 960
    ) -> None:
        self.site = site
        self.username = username
        self.context = browser.new_context(viewport={"width": width, "height": height})
        self.context.grant_permissions(["notifications"], origin=site.base)
        self.context.add_init_script(RECORD_NOTIFICATIONS)
        self.context.add_init_script(RECORD_TONES)
        serve_static(site, self.context)
        self.page = self.context.new_page()
        self.errors: list[str] = []
        self.page.on("pageerror", lambda error: self.errors.append(str(error)))
        self.page.on("dialog", lambda dialog: dialog.accept())  # "Take over?", "Close?": yes

    def sign_in(self) -> Staff:
        page = self.page
        page.goto(f"{self.site.base}/admin/login/?next={DESK}")
        page.fill("#id_username", self.username)
        page.fill("#id_password", PASSWORD)
        page.click("input[type=submit]")
        page.wait_for_url(f"**{DESK}")
        self.live()
        return self

    def live(self) -> None:
        """The page's scripts ran and its live stream is open."""
        self.page.wait_for_selector("[data-live][data-state=live]", timeout=20_000)

    def told_of(self, conversation_id: str) -> None:
        """This tab's alerts have read ``conversation_id`` as waiting, so a reload that follows
        counts it rather than announcing it (desk-alerts.js keeps what a tab was told in
        sessionStorage)."""
        self.page.wait_for_function(
            "id => (sessionStorage.getItem('poppy-desk.waiting-seen') || '').includes(id)",
            arg=conversation_id,
            timeout=20_000,
        )

    def open(self, conversation_id: str) -> None:
        self.page.goto(f"{self.site.base}{DESK}{conversation_id}/")
        self.page.wait_for_selector("#poppy-desk[data-ready='1']")
        self.live()

    def notifications(self) -> list[dict[str, str]]:
        return list(self.page.evaluate("window.__poppyNotifications || []"))

    def tones(self) -> int:
        """How many tones this page has sounded (a chime is two)."""
        return int(self.page.evaluate("window.__poppyTones || 0"))

    def settled(self, count: int) -> None:
        self.page.wait_for_function(
            f"document.querySelectorAll('{SETTLED}').length >= {count}", timeout=20_000
        )

    def fits(self) -> bool:
        """Nothing runs off the page sideways."""
        return bool(
            self.page.evaluate(
                "document.documentElement.scrollWidth <= document.documentElement.clientWidth"
            )
        )

    def close(self) -> None:
        self.context.close()


@contextlib.contextmanager
def signed_in(browser: Any, site: Site, names: tuple[str, ...]) -> Iterator[tuple[Staff, ...]]:
    """Staff each signed in in a browser context of their own, on the queue; at the end,
    none of their pages met a script error."""
    people = [Staff(browser, site, name) for name in names]
    try:
        yield tuple(person.sign_in() for person in people)
        for person in people:
            assert person.errors == [], person.errors
    finally:
        for person in people:
            person.close()


def screenshot(page: Any, name: str, *, full_page: bool = False) -> Path:
    """``var/test-artifacts/desk/<name>.png``; copied to ``docs/img/`` when asked."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=full_page)
    if os.environ.get(DOCS_SCREENSHOTS) == "1":
        shutil.copyfile(path, DOCS_IMG / path.name)
    return path
