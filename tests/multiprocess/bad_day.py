"""The bad-day campaign of issue 50: one scenario at a time on a running deployment, and what
an operator sees of it.

A :class:`Watch` runs while a dependency is broken: an orchestrator's readiness probe every
second (its answers kept), the alert recorder scraping ``/metrics``
(:class:`tests.alert_replay.Recorder`), and the messages a personal agent sends, each
acknowledged (201/202) or refused (503). Once the dependency is back, :meth:`Watch.settle`
sends the refused messages again (a client retries a 503 with the same message id) and waits
until every conversation is idle, counting its company messages: each acknowledged message
must be answered exactly once, nothing lost. :meth:`Watch.row` is the scenario's line of
the table in docs/operations.md#a-bad-day-scenario-by-scenario.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx

from tests.agents import PersonalAgent, company_messages
from tests.alert_replay import Recorder, firing, scrape
from tests.multiprocess.cluster import Cluster

#: What a stand-in orchestrator waits for readiness's answer (above its 6 s deadline).
PROBE_TIMEOUT = 20.0


@dataclass
class Sent:
    """One message: its conversation, its body (to send it again), and the answers it got."""

    agent: PersonalAgent
    body: dict[str, Any]
    statuses: list[int] = field(default_factory=list)
    conversation_id: str | None = None


@dataclass
class Watch:
    """One scenario, watched from outside: readiness, metrics, messages and logs."""

    name: str
    cluster: Cluster
    web: str
    readiness: list[tuple[float, int, list[str]]] = field(default_factory=list)
    sent: list[Sent] = field(default_factory=list)
    fault_at: float = 0.0
    recorder: Recorder | None = None
    log_sizes: dict[str, int] = field(default_factory=dict)
    alerts: dict[str, float] = field(default_factory=dict)

    def fault(self) -> None:
        """The dependency breaks now: alerts are timed from here, log lines counted from here."""
        self.fault_at = time.time()
        self.log_sizes = {name: len(self.log(name)) for name in list(self.cluster.processes)}

    def send(self, web: str | None = None, text: str = "hello") -> Sent:
        """A new conversation's first message to ``web`` (the watched process by default)."""
        agent = PersonalAgent().at(web or self.web)
        sent = Sent(agent, agent.message(text))
        self.sent.append(sent)
        self._post(sent)
        return sent

    def _post(self, sent: Sent) -> None:
        try:
            answer = sent.agent.post("", sent.body)
        except httpx.HTTPError:
            sent.statuses.append(0)  # no answer at all: the bound the scenario is about
            return
        sent.statuses.append(answer.status_code)
        if answer.status_code in (200, 201, 202):
            sent.conversation_id = answer.json()["conversation_id"]

    def recorded(self, name: str, **labels: str) -> float:
        """The highest of ``name``'s series with ``labels`` (and any others) in the recorder's
        latest scrape, as PromQL's ``max`` reads them (0 before any)."""
        assert self.recorder is not None
        scrapes = self.recorder.recording.scrapes
        wanted = [f'{key}="{value}"' for key, value in labels.items()]
        return max(
            (
                value
                for series, value in (scrapes[-1] if scrapes else {}).items()
                if series.split("{")[0] == name and all(label in series for label in wanted)
            ),
            default=0.0,
        )

    def probed(self) -> tuple[int, list[str]]:
        """The latest readiness answer: its status and the failing checks."""
        return self.readiness[-1][1:] if self.readiness else (0, [])

    def log(self, name: str) -> str:
        """Everything process ``name`` logged."""
        return (self.cluster.tmp / f"{name}.log").read_text(errors="replace")

    def logged_since_fault(self, name: str) -> str:
        """What process ``name`` logged since :meth:`fault`."""
        return self.log(name)[self.log_sizes.get(name, 0) :]

    def settle(self, timeout: float = 90.0) -> None:
        """Every refused message sent again, every conversation idle, each acknowledged one
        answered by exactly one company message."""
        for sent in self.sent:
            if sent.conversation_id is None:
                self._post(sent)
                assert sent.conversation_id is not None, (self.name, sent.statuses)
        for sent in self.sent:
            assert sent.conversation_id is not None
            events = sent.agent.settled(sent.conversation_id, timeout=timeout)
            answers = company_messages(events)
            assert len(answers) == 1, (self.name, sent.statuses, events)

    def answers(self) -> list[str]:
        """Each conversation's one company message (after :meth:`settle`)."""
        texts = []
        for sent in self.sent:
            assert sent.conversation_id is not None
            events = sent.agent.all_events(sent.conversation_id)
            texts.extend(message.get("text", "") for message in company_messages(events))
        return texts

    def row(self) -> dict[str, Any]:
        statuses = sorted({status for sent in self.sent for status in sent.statuses})
        seen = sorted({(status, tuple(failing)) for _, status, failing in self.readiness})
        return {
            "scenario": self.name,
            "readiness": [{"status": s, "failing": list(f)} for s, f in seen],
            "alerts_after_seconds": {k: round(v) for k, v in sorted(self.alerts.items())},
            "message_statuses": statuses,
            "messages": len(self.sent),
        }


def _probe(watch: Watch, url: str, stop: threading.Event) -> None:
    while not stop.is_set():
        try:
            answer = httpx.get(url, timeout=PROBE_TIMEOUT)
            failing = answer.json().get("failing", []) if answer.status_code == 503 else []
            watch.readiness.append((time.time(), answer.status_code, failing))
        except (httpx.HTTPError, ValueError):
            watch.readiness.append((time.time(), 0, []))
        stop.wait(1.0)


@contextlib.contextmanager
def watching(
    name: str, cluster: Cluster, web: str, *, ready_at: str | None = None
) -> Iterator[Watch]:
    """Probe readiness (at ``ready_at``'s, by default the watched process's) and record the
    metrics while the block runs; the alerts of the recording, timed from the fault, after."""
    watch = Watch(name, cluster, web)
    watch.recorder = Recorder(f"{web}/metrics", step=1.0)
    stop = threading.Event()
    prober = threading.Thread(
        target=_probe, args=(watch, f"{ready_at or web}/health/ready", stop), daemon=True
    )
    prober.start()
    try:
        with watch.recorder.running():
            yield watch
    finally:
        stop.set()
        prober.join(timeout=PROBE_TIMEOUT + 5)
    recording = watch.recorder.recording
    assert watch.fault_at, "the scenario never said when its fault began"
    offset = watch.fault_at - recording.times[0]
    watch.alerts = {k: v - offset for k, v in firing(recording, minutes_after=10).items()}


def scraped(web: str, name: str, **labels: str) -> float:
    """The series ``name`` with ``labels`` (and any others) on ``web``'s ``/metrics`` now,
    added up."""
    wanted = [f'{key}="{value}"' for key, value in labels.items()]
    return sum(
        value
        for series, value in scrape(f"{web}/metrics", timeout=10).items()
        if series.split("{")[0] == name and all(label in series for label in wanted)
    )
