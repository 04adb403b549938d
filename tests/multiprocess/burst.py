"""The connection burst of issue 50, as an operator saw it: staff with the desk open (its live
stream held, its queue and alerts read again and again) while anonymous bursts of readiness
probes arrive, and the PostgreSQL connections each process holds counted all along.

One driver for ``tests/multiprocess/test_bad_day.py`` (the bound holds, no 5xx) and
``bench/connection_burst.py`` (the figures, with the pool and without).
"""

from __future__ import annotations

import collections
import contextlib
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import psycopg

from tests.multiprocess.cluster import Cluster

DESK = "/admin/poppy_django/conversation/desk/"
PASSWORD = "a-desk-password-1"


def add_staff(cluster: Cluster, names: list[str]) -> None:
    """Desk staff (``handle_conversations``) with :data:`PASSWORD`, in one ``manage.py``."""
    lines = ["from django.contrib.auth.models import Permission, User"]
    lines.append("p = Permission.objects.get(codename='handle_conversations')")
    for name in names:
        lines.append(
            f"User.objects.create_user({name!r}, password={PASSWORD!r}, is_staff=True)"
            ".user_permissions.add(p)"
        )
    cluster.manage("shell", "-c", "\n".join(lines))


@contextlib.contextmanager
def desk_session(base: str, username: str) -> Iterator[httpx.Client]:
    """A staff member signed in to the admin, as a browser is (cookies, CSRF)."""
    with httpx.Client(base_url=base, timeout=60, follow_redirects=True) as browser:
        login = browser.get(f"/admin/login/?next={DESK}")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', login.text)
        assert token, login.text[:500]
        answer = browser.post(
            "/admin/login/",
            data={
                "csrfmiddlewaretoken": token[1],
                "username": username,
                "password": PASSWORD,
                "next": DESK,
            },
            headers={"Referer": f"{base}/admin/login/"},
        )
        assert answer.status_code == 200 and str(answer.url).endswith(DESK), answer.url
        yield browser


@dataclass
class Figures:
    """What a burst saw: answers by route and status, and the connections PostgreSQL held."""

    answers: collections.Counter[tuple[str, int]] = field(default_factory=collections.Counter)
    #: The most connections held at once, by process (``application_name``) and in all.
    peak: dict[str, int] = field(default_factory=dict)
    peak_total: int = 0
    samples: int = 0
    #: Answers that were not an HTTP answer (a timeout, a reset), by route and kind.
    failures: collections.Counter[tuple[str, str]] = field(default_factory=collections.Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def answered(self, route: str, status: int) -> None:
        with self.lock:
            self.answers[(route, status)] += 1

    def failed(self, route: str, error: Exception) -> None:
        with self.lock:
            self.failures[(route, type(error).__name__)] += 1

    def by_status(self) -> dict[str, dict[int, int]]:
        table: dict[str, dict[int, int]] = collections.defaultdict(dict)
        for (route, status), count in sorted(self.answers.items()):
            table[route][status] = count
        return dict(table)

    def five_hundreds(self) -> dict[tuple[str, int], int]:
        """Answers 500 or above other than 503 (a 503 is the pool's or a probe's answer)."""
        return {k: n for k, n in self.answers.items() if k[1] >= 500 and k[1] != 503}

    def as_json(self) -> dict[str, Any]:
        return {
            "answers": {route: dict(statuses) for route, statuses in self.by_status().items()},
            "failures": {f"{r} {k}": n for (r, k), n in sorted(self.failures.items())},
            "peak_connections": self.peak,
            "peak_total": self.peak_total,
            "samples": self.samples,
        }


def _count_connections(cluster: Cluster, figures: Figures, stop: threading.Event) -> None:
    """Sample ``pg_stat_activity`` on one connection opened first: a full server refuses new
    ones ("too many clients"), and the peak is what is wanted then."""
    sql = (
        "SELECT application_name, count(*) FROM pg_stat_activity"
        f" WHERE datname = '{cluster.name}' GROUP BY application_name"
    )
    with psycopg.connect(cluster.pg_admin, autocommit=True) as admin:
        while not stop.wait(0.2):
            _sample(admin.execute(sql).fetchall(), figures)


def _sample(rows: list[tuple[Any, ...]], figures: Figures) -> None:
    with figures.lock:
        figures.samples += 1
        for name, count in rows:
            figures.peak[name] = max(figures.peak.get(name, 0), int(count))
        figures.peak_total = max(figures.peak_total, sum(int(n) for _, n in rows))


def _desk_tab(base: str, username: str, figures: Figures, stop: threading.Event) -> None:
    """One tab: the queue's live stream held open, its rows and alerts read every second."""
    with desk_session(base, username) as browser:
        streaming = threading.Thread(target=_hold_stream, args=(browser, figures, stop))
        streaming.start()
        try:
            while not stop.wait(1.0):
                for route, url in (("desk rows", DESK), ("desk alerts", f"{DESK}alerts.json")):
                    try:
                        figures.answered(route, browser.get(url).status_code)
                    except httpx.HTTPError as error:
                        figures.failed(route, error)
        finally:
            streaming.join(timeout=60)


def _hold_stream(browser: httpx.Client, figures: Figures, stop: threading.Event) -> None:
    """The desk's live stream (django-eventstream's SSE), reopened if it ends."""
    while not stop.is_set():
        try:
            with browser.stream("GET", f"{DESK}stream/", timeout=httpx.Timeout(60, read=5)) as s:
                figures.answered("desk stream", s.status_code)
                for _ in s.iter_lines():
                    if stop.is_set():
                        return
        except httpx.ReadTimeout:
            continue  # a quiet stream: read again (the tab keeps it open)
        except httpx.HTTPError as error:
            figures.failed("desk stream", error)
            stop.wait(1.0)


def _probe(base: str, figures: Figures) -> None:
    try:
        figures.answered("readiness", httpx.get(f"{base}/health/ready", timeout=60).status_code)
    except httpx.HTTPError as error:
        figures.failed("readiness", error)


def run(
    cluster: Cluster,
    base: str,
    staff: list[str],
    *,
    seconds: float = 40.0,
    probes: int = 25,
    every: float = 2.0,
) -> Figures:
    """Desk tabs for ``staff`` (signed in already by :func:`add_staff`), bursts of
    ``probes`` readiness probes every ``every`` seconds for ``seconds``; the figures."""
    figures = Figures()
    stop = threading.Event()
    counting = threading.Thread(target=_count_connections, args=(cluster, figures, stop))
    counting.start()
    tabs = [threading.Thread(target=_desk_tab, args=(base, name, figures, stop)) for name in staff]
    for tab in tabs:
        tab.start()
    bursts: list[threading.Thread] = []
    try:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            burst = [threading.Thread(target=_probe, args=(base, figures)) for _ in range(probes)]
            for probe in burst:
                probe.start()
            bursts += burst
            time.sleep(every)
    finally:
        for probe in bursts:
            probe.join(timeout=120)
        stop.set()
        for tab in tabs:
            tab.join(timeout=120)
        counting.join(timeout=30)
    return figures
