"""The kill campaign's short version: a handful of SIGKILLed workers and web processes and a
Redis restart under a dozen conversing agents, checked from the database and the clients.
(``bench/kill_campaign.py --llm`` runs it on LLM-shaped turns: docs/operations.md.)
The full campaign (200+ kills) is ``bench/kill_campaign.py``; its table is in the docs.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.multiprocess.cluster import ROOT

pytestmark = pytest.mark.multiprocess


@pytest.mark.timeout(900)  # a few minutes on a loaded machine
def test_the_short_kill_campaign_finds_no_violation(tmp_path: Path):
    out = tmp_path / "kill_campaign.json"
    result = subprocess.run(
        [
            *[sys.executable, str(ROOT / "bench" / "kill_campaign.py"), "--short", "--metrics"],
            *["--out", str(out)],
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(out.read_text())
    assert report["violations"] == {
        "unanswered": [],
        "company_id_twice": [],
        "action_twice": [],
        "working_past_bound": [],
        "reader_mismatch": [],
    }
    assert report["kills"] >= 5 and report["web_kills"] >= 1 and report["redis_restarts"] == 1
    assert report["messages_acked"] > 0 and report["replies"] >= report["messages_acked"]
    assert report["actions_succeeded"] == report["cancels_asked"] > 0, report[
        "actions_not_succeeded"
    ]
    # The take-ups of the killed workers' conversations, as /metrics counts them, and every
    # turn ended: none in flight once all is answered.
    assert report["metrics"]["poppy_leases_taken_up_total"] >= 1
    assert report["metrics"]["poppy_turns_in_flight"] == 0
    assert report["metrics"]["poppy_turns_total{outcome=answered}"] > 0
