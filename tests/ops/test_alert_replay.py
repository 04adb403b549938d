"""tests/alert_replay.py, the bad-day campaign's alert column: a recording replayed to
promtool names the alerts that fire and when, continued past its end as it was going."""

from __future__ import annotations

from pathlib import Path

from tests.alert_replay import Recording, firing

START = 1_780_000_000.0  # a Unix time, as the app's *_time_seconds gauges hold


def _recorded(steps: int, redis_down_from: int | None) -> Recording:
    recording = Recording(step=1.0)
    for k in range(steps):
        now = START + k
        down = redis_down_from is not None and k >= redis_down_from
        recording.times.append(now)
        recording.scrapes.append(
            {
                'up{instance="web:8000",job="poppy-web"}': 1.0,
                "poppy_engine_heartbeat_time_seconds": now - 0.5,
                'poppy_gauges_read_time_seconds{source="database"}': now - 0.2,
                'poppy_gauges_read_time_seconds{source="broker"}': (
                    START + redis_down_from if down else now - 0.2
                ),
                'poppy_readiness_failing{check="database"}': 0.0,
                'poppy_readiness_failing{check="redis"}': 1.0 if down else 0.0,
                'poppy_turns_total{outcome="answered"}': float(k),
                'poppy_turns_total{outcome="failed"}': 0.0,
            }
        )
    return recording


def test_a_healthy_run_fires_nothing(tmp_path: Path) -> None:
    recording = _recorded(30, redis_down_from=None)
    recording.save(tmp_path / "healthy.json")
    assert firing(Recording.load(tmp_path / "healthy.json"), minutes_after=10) == {}


def test_redis_stopped_fires_its_alerts_after_their_bounds() -> None:
    fired = firing(_recorded(30, redis_down_from=20), minutes_after=10)
    assert set(fired) == {"PoppyRedisUnreachable", "PoppyNotReady"}, fired
    # Readiness failing from 20 s: its own alert after `for: 1m`, readiness's after 2m.
    assert 80 <= fired["PoppyRedisUnreachable"] <= 95
    assert 140 <= fired["PoppyNotReady"] <= 155


def test_one_process_s_broker_reads_stopped_is_not_redis_down() -> None:
    """Each process's read times under its pid (two web processes sharing a host's files):
    the one whose broker URL is wrong never reads, the other keeps reading. Each series is
    continued as it went (one held, one with the clock), and the latest read of any is
    recent however long the replay runs."""
    recording = Recording(step=1.0)
    for k in range(30):
        now = START + k
        recording.times.append(now)
        recording.scrapes.append(
            {
                'up{instance="web:8000",job="poppy-web"}': 1.0,
                "poppy_engine_heartbeat_time_seconds": now - 0.5,
                'poppy_gauges_read_time_seconds{pid="101",source="broker"}': START,
                'poppy_gauges_read_time_seconds{pid="102",source="broker"}': now - 0.2,
                'poppy_gauges_read_time_seconds{pid="101",source="database"}': now - 0.2,
                'poppy_gauges_read_time_seconds{pid="102",source="database"}': now - 0.2,
                'poppy_readiness_failing{check="broker",pid="101"}': 1.0,
                'poppy_readiness_failing{check="broker",pid="102"}': 0.0,
            }
        )
    fired = firing(recording, minutes_after=10)
    assert set(fired) == {"PoppyNotReady"}, fired


def _slow_scrape_then_quick_ones(heartbeat_stops: bool) -> Recording:
    """Scrapes every second, the eleventh answered 5.5 s after it began (its target busy),
    the recording's last ten steps from it; the worker's heartbeat read as each scrape was
    answered: a beat every second, or none from the start when ``heartbeat_stops``."""
    recording = Recording(step=1.0)
    begun = START
    for k in range(17):
        answered = begun + (5.5 if k == 10 else 0.1)
        recording.times.append(begun)
        recording.answered.append(answered)
        recording.scrapes.append(
            {
                'up{instance="web:8000",job="poppy-web"}': 1.0,
                'poppy_engine_heartbeat_time_seconds{pid="201"}': (
                    START if heartbeat_stops else answered - 0.5
                ),
                'poppy_gauges_read_time_seconds{pid="101",source="database"}': answered - 0.2,
                'poppy_gauges_read_time_seconds{pid="101",source="broker"}': answered - 0.2,
            }
        )
        begun = max(begun + 1.0, answered)  # the recorder waits for a slow scrape
    return recording


def test_a_slow_scrape_does_not_stop_a_beating_heartbeat() -> None:
    """The last ten steps begin on the slow scrape (its values read 5.5 s after its place on
    the grid) and end on a quick one: the heartbeat moved about 4 s in what the grid counts
    as 10. Judged by its answers' times it beats, and nothing fires; stopped, it still
    fires."""
    assert firing(_slow_scrape_then_quick_ones(heartbeat_stops=False), minutes_after=10) == {}
    fired = firing(_slow_scrape_then_quick_ones(heartbeat_stops=True), minutes_after=10)
    assert set(fired) == {"PoppyNoWorkerHeartbeat"}, fired
