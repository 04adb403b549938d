"""Which alert of ``deploy/prometheus/poppy-alerts.yml`` fires in a recorded run, and when.

A bad-day scenario lasts seconds to a minute in a test; the alerts wait minutes (``for:``,
three minutes without a read). So a run is recorded as it happens (:class:`Recorder`: every
``step`` seconds, one scrape of ``/metrics`` plus ``up`` for the target), then replayed to
``promtool test rules`` as input series, each **continued past the recording as it was going
at its end** (a counter at its last rate, a heartbeat moving with the clock or stopped, any
other gauge held): "if the outage lasted, this alert fires after so long". The replay
(:func:`firing`) evaluates every alert at every step of the recording and the continuation,
and answers the first time each was firing, counted from the start of the recording.

Recordings are plain JSON (:meth:`Recording.save`: the step, when each scrape began and was
answered, and its samples), so a campaign can keep them with its report. Series whose value
is a Unix time (``*_time_seconds``) are shifted to the replay's clock, which starts at 0.

    recorder = Recorder(f"{web}/metrics", step=1.0)
    with recorder.running():
        ...  # the scenario
    fired = firing(recorder.recording, minutes_after=15)
    # {"PoppyRedisUnreachable": 63.0, "PoppyNotReady": 121.0, ...} (seconds from the start)
"""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import yaml
from prometheus_client.parser import text_string_to_metric_families

ROOT = Path(__file__).resolve().parents[1]
RULES = ROOT / "deploy" / "prometheus" / "poppy-alerts.yml"
#: The job name the recorder gives its target's ``up`` (the alerts watch ``poppy.*`` jobs).
JOB = "poppy-web"

Sample = dict[str, float]  # a series, as PromQL writes it ('name{a="b"}') -> value


@dataclass
class Recording:
    """Scrapes taken every ``step`` seconds: when each began and was answered (Unix times),
    and its samples."""

    step: float
    times: list[float] = field(default_factory=list)
    scrapes: list[Sample] = field(default_factory=list)
    #: When each scrape's answer came: a slow one (its target busy) read its values up to
    #: seconds after it began. Empty in a recording made by hand, or saved without them.
    answered: list[float] = field(default_factory=list)

    def answer_times(self) -> list[float]:
        """When each scrape was answered; when it began, where that was not recorded."""
        return self.answered if len(self.answered) == len(self.times) else self.times

    def save(self, path: Path) -> None:
        kept = {
            "step": self.step,
            "times": self.times,
            "answered": self.answered,
            "scrapes": self.scrapes,
        }
        path.write_text(json.dumps(kept))

    @classmethod
    def load(cls, path: Path) -> Recording:
        data = json.loads(path.read_text())
        return cls(data["step"], data["times"], data["scrapes"], data.get("answered", []))


def _series(name: str, labels: dict[str, str]) -> str:
    inside = ",".join(f'{key}="{value}"' for key, value in sorted(labels.items()))
    return f"{name}{{{inside}}}" if inside else name


def scrape(url: str, timeout: float) -> Sample:
    """One scrape as series -> value, with ``up`` 1; ``up`` 0 alone when it fails."""
    target = {"job": JOB, "instance": httpx.URL(url).netloc.decode()}
    try:
        answer = httpx.get(url, timeout=timeout)
        answer.raise_for_status()
    except httpx.HTTPError:
        return {_series("up", target): 0.0}
    found = {
        _series(sample.name, sample.labels): float(sample.value)
        for family in text_string_to_metric_families(answer.text)
        for sample in family.samples
    }
    found[_series("up", target)] = 1.0
    return found


class Recorder:
    """Scrapes ``url`` every ``step`` seconds on a thread while :meth:`running`."""

    def __init__(self, url: str, step: float = 1.0) -> None:
        self.url = url
        self.recording = Recording(step)
        self._stop = threading.Event()

    def _run(self) -> None:
        next_at = time.time()
        while not self._stop.is_set():
            started = time.time()  # a scrape's time is when it began, as Prometheus stamps it
            taken = scrape(self.url, timeout=max(self.recording.step, 10.0))
            self.recording.times.append(started)
            self.recording.scrapes.append(taken)
            self.recording.answered.append(time.time())
            next_at = max(next_at + self.recording.step, time.time())  # a slow scrape: no burst
            self._stop.wait(max(0.0, next_at - time.time()))

    @contextlib.contextmanager
    def running(self) -> Iterator[Recording]:
        thread = threading.Thread(target=self._run, name="alert-recorder", daemon=True)
        thread.start()
        try:
            yield self.recording
        finally:
            self._stop.set()
            thread.join(timeout=30)


def _format(value: float) -> str:
    return repr(round(value, 6))


def on_grid(recording: Recording) -> list[Sample]:
    """The scrapes at every ``step`` from the first: at each, the latest taken by then (a
    scrape slower than the step leaves the one before standing, as Prometheus would read)."""
    return [recording.scrapes[k] for k in _grid_indexes(recording)]


def _grid_indexes(recording: Recording) -> list[int]:
    """Which scrape stands at each step of :func:`on_grid`."""
    start, step = recording.times[0], recording.step
    count = int((recording.times[-1] - start) / step) + 1
    indexes: list[int] = []
    latest = 0
    for k in range(count):
        while latest + 1 < len(recording.times) and recording.times[latest + 1] <= start + k * step:
            latest += 1
        indexes.append(latest)
    return indexes


#: Counters' series (and histograms'): continued at their rate.
_COUNTER = re.compile(r"^[a-z_]+_(total|count|sum|bucket)\b")
#: Gauges whose value is a Unix time (a heartbeat, a read): continued with the clock while
#: they moved, held while they did not.
_CLOCK = re.compile(r"^[a-z_]+_time_seconds\b")
#: Steps at the end of a recording that say how a series was going.
_WINDOW = 10


def _continued(
    name: str, recent: list[tuple[int, float]], answered: list[float], step: float, extra: int
) -> list[float]:
    """``extra`` more values of a series from its last ones (index on the grid, value): a
    counter at its rate over them, a clock with the clock if it moved at least half as fast
    as the time between the answers that carried its first and last (``answered``, by index
    on the grid; else held: a heartbeat or a read that stopped), any other gauge held.

    A clock is judged by its answers' times, not by its places on the grid: a scrape stands
    where it began, and one slow to answer read its values seconds later (the burst's
    scrapes of the web process it loads, up to 5.5 s on a loaded machine), so a heartbeat
    beating every second seemed to move at less than half the clock's pace between such a
    scrape and a quick one, was held, and PoppyNoWorkerHeartbeat fired at 210 s."""
    (i0, v0), (i1, v1) = recent[0], recent[-1]
    slope = (v1 - v0) / (i1 - i0) if i1 > i0 else 0.0
    if _CLOCK.match(name):
        elapsed = answered[i1] - answered[i0]
        slope = step if elapsed > 0 and v1 - v0 >= elapsed / 2 else 0.0
    elif not _COUNTER.match(name):
        slope = 0.0
    return [v1 + slope * (k + 1) for k in range(extra)]


def input_series(recording: Recording, minutes_after: float) -> list[dict[str, str]]:
    """promtool's input series: the recording on its grid (:func:`on_grid`), then each series
    continued as it was going over its last steps (:func:`_continued`) for ``minutes_after``
    more minutes; '_' where it was absent."""
    start = recording.times[0]
    extra = int(minutes_after * 60 / recording.step)
    grid = on_grid(recording)
    answer_times = recording.answer_times()
    answered = [answer_times[k] for k in _grid_indexes(recording)]
    names = sorted({name for scrape_ in grid for name in scrape_})
    built = []
    for name in names:
        shift = start if _CLOCK.match(name) else 0.0
        values = [scrape_.get(name) for scrape_ in grid]
        present = [(i, v - shift) for i, v in enumerate(values) if v is not None]
        if not present:
            continue
        words = ["_" if v is None else _format(v - shift) for v in values]
        if values[-1] is not None:  # continued only if the series was there at the end
            recent = [(i, v) for i, v in present if i >= len(values) - 1 - _WINDOW]
            continued = _continued(name, recent, answered, recording.step, extra)
            words += [_format(v) for v in continued]
        else:
            words += ["_"] * extra
        built.append({"series": name, "values": " ".join(words)})
    return built


def alert_names(rules: Path = RULES) -> list[str]:
    groups = yaml.safe_load(rules.read_text())["groups"]
    return [rule["alert"] for group in groups for rule in group["rules"] if "alert" in rule]


#: promtool's report of an alert expected quiet that was firing: its name and the time.
_FAILED = re.compile(
    r"alertname: (\w+), time: ([0-9hms.]+),\s*\n\s*exp:\[\s*\],\s*\n\s*got:\[\s*\n\s*0:"
)


def _duration(seconds: float) -> str:
    """Seconds as a Prometheus duration (whole milliseconds: promtool takes no fractions)."""
    return f"{round(seconds * 1000)}ms"


def _seconds(duration: str) -> float:
    total = 0.0
    for amount, unit in re.findall(r"([0-9.]+)(h|ms|m|s)", duration):
        total += float(amount) * {"h": 3600, "m": 60, "s": 1, "ms": 0.001}[unit]
    return total


def firing(
    recording: Recording, minutes_after: float = 15, rules: Path = RULES
) -> dict[str, float]:
    """Each alert that fires, with the seconds from the recording's start to the first
    evaluation where it is firing (none for those that stay quiet)."""
    step = recording.step
    steps = len(on_grid(recording)) + int(minutes_after * 60 / step)
    every = max(1, int(15 / step))  # evaluate every 15 s (and at each step if longer)
    names = alert_names(rules)
    cases = [
        {"eval_time": _duration(k * step), "alertname": name, "exp_alerts": []}
        for k in range(0, steps, every)
        for name in names
    ]
    test = {
        "rule_files": [str(rules)],
        "evaluation_interval": _duration(min(step * every, 15)),
        "tests": [
            {
                "interval": _duration(step),
                "input_series": input_series(recording, minutes_after),
                "alert_rule_test": cases,
            }
        ],
    }
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "replay.test.yml"
        path.write_text(yaml.safe_dump(test, width=10**9))
        result = subprocess.run(
            ["promtool", "test", "rules", str(path)],
            capture_output=True,
            text=True,
            timeout=600,
        )
    first: dict[str, float] = {}
    for name, at in _FAILED.findall(result.stdout + result.stderr):
        seconds = _seconds(at)
        first[name] = min(seconds, first.get(name, seconds))
    if result.returncode != 0 and not first:
        raise RuntimeError(f"promtool could not replay the recording:\n{result.stderr[-3000:]}")
    return first
