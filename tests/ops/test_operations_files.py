"""The operations files in deploy/: the alert rules and the Grafana dashboard are valid
PromQL (checked by promtool, from Debian's prometheus package: scripts/ensure-services.sh),
the alerts fire when they should (promtool's rule unit tests), and every metric they name is
one the app records."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from poppy_django.observe.prometheus import prometheus_name

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "prometheus" / "poppy-alerts.yml"
RULE_TESTS = ROOT / "deploy" / "prometheus" / "poppy-alerts.test.yml"
DASHBOARD = ROOT / "deploy" / "grafana" / "poppy-dashboard.json"
#: Where the app creates its instruments (the OpenTelemetry names and units).
INSTRUMENTED = [
    ROOT / "poppy_django" / "observe" / "metrics.py",
    ROOT / "poppy_django" / "fanout" / "bus.py",
]
ALERTS = {
    "PoppyTurnsPastBound",
    "PoppyHandoffWaitingTooLong",
    "PoppyHandoffsGivenBack",
    "PoppyNoWorkerHeartbeat",
    "PoppyBrokerUnreachable",
    "PoppyFailedTurnRate",
    "PoppyRefusalSpike",
    "PoppyServerErrors",
    "PoppyNotReady",
    "PoppyTargetDown",
    "PoppyDatabaseUnreachable",
    "PoppyRedisUnreachable",
    "PoppyBrokerBacklog",
    "PoppyTurnStartSlow",
}
#: Series Prometheus makes itself, which rules may name besides the app's.
PROMETHEUS_SERIES = {"up"}


def promtool() -> str:
    found = shutil.which("promtool")
    assert found, "promtool is missing: scripts/ensure-services.sh installs Debian's prometheus"
    return found


def recorded_metrics() -> set[str]:
    """The Prometheus names of the app's instruments (histograms' and counters' series too)."""
    pattern = re.compile(
        r'create_(\w+)\(\s*"(poppy\.[a-z_.]+)"(?:(?!create_).)*?unit="([^"]*)"', re.S
    )
    names: set[str] = set()
    for path in INSTRUMENTED:
        for kind, name, unit in pattern.findall(path.read_text()):
            base = prometheus_name(name, unit)
            if kind == "counter":
                names.add(f"{base}_total")
            elif kind == "histogram":
                names |= {f"{base}_bucket", f"{base}_sum", f"{base}_count"}
            else:
                names.add(base)
    return names


def named_metrics(expression: str) -> set[str]:
    names = set(re.findall(r"\b(poppy_[a-z_]+)\b", expression))
    return names | {name for name in PROMETHEUS_SERIES if re.search(rf"\b{name}\{{", expression)}


def test_the_alert_rules_are_valid_and_fire_when_they_should() -> None:
    checked = subprocess.run(
        [promtool(), "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = subprocess.run(
        [promtool(), "test", "rules", RULE_TESTS.name],
        cwd=RULE_TESTS.parent,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert tested.returncode == 0, tested.stdout + tested.stderr
    rules = yaml.safe_load(RULES.read_text())["groups"][0]["rules"]
    assert {rule["alert"] for rule in rules} == ALERTS
    known = recorded_metrics() | PROMETHEUS_SERIES
    for rule in rules:
        assert named_metrics(rule["expr"]) <= known, rule["alert"]


def test_every_alert_is_tested_firing_and_quiet() -> None:
    """promtool passes a test file that leaves an alert out: each must be seen both ways."""
    cases = [
        case
        for test in yaml.safe_load(RULE_TESTS.read_text())["tests"]
        for case in test["alert_rule_test"]
    ]
    fired = {case["alertname"] for case in cases if case["exp_alerts"]}
    quiet = {case["alertname"] for case in cases if not case["exp_alerts"]}
    assert fired == ALERTS, ALERTS - fired
    assert quiet == ALERTS, ALERTS - quiet


def test_the_dashboard_queries_are_valid_promql_on_the_apps_metrics(tmp_path: Path) -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    expressions = [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    assert len(expressions) >= 15
    # promtool parses PromQL in rule files: each query becomes a recording rule to check.
    as_rules = {
        "groups": [
            {
                "name": "dashboard",
                "rules": [
                    {"record": f"poppy:dashboard_query_{n}", "expr": expression}
                    for n, expression in enumerate(expressions)
                ],
            }
        ]
    }
    rules = tmp_path / "dashboard-queries.yml"
    rules.write_text(yaml.safe_dump(as_rules))
    checked = subprocess.run(
        [promtool(), "check", "rules", str(rules)], capture_output=True, text=True, timeout=60
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    known = recorded_metrics() | PROMETHEUS_SERIES
    for expression in expressions:
        assert named_metrics(expression) <= known, expression
    assert {name for e in expressions for name in named_metrics(e)} >= {
        "poppy_turns_in_flight",
        "poppy_turns_total",
        "poppy_model_tokens_total",
        "poppy_leases_taken_up_total",
        "poppy_fanout_lag_seconds_bucket",
        "poppy_readiness_failing",
        "poppy_broker_queue_depth",
        "poppy_request_duration_seconds_count",
    }


@pytest.mark.parametrize(
    ("expression", "wrong"),
    [("sum(rate(poppy_turns_total[5m]", "unclosed"), ("sum(poppy_no_such_metric)", "unknown")],
)
def test_a_wrong_query_is_caught(tmp_path: Path, expression: str, wrong: str) -> None:
    """The checks above can fail: a broken query and an unknown metric are both caught."""
    if wrong == "unknown":
        assert not named_metrics(expression) <= recorded_metrics()
        return
    rules = tmp_path / "broken.yml"
    rules.write_text(
        yaml.safe_dump({"groups": [{"name": "x", "rules": [{"record": "x", "expr": expression}]}]})
    )
    checked = subprocess.run(
        [promtool(), "check", "rules", str(rules)], capture_output=True, text=True, timeout=60
    )
    assert checked.returncode != 0
