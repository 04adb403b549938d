"""scripts/serve-production.sh as documented (issue 50): with ``TLS=1`` it migrates and serves
https (poppy.json naming the host that serves it, check E301), beat keeps its schedule under
``POPPY_VAR_DIR``, and a stop ends every process it started, bounded even with a client
holding a connection open."""

from __future__ import annotations

import os
import signal
import ssl
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.multiprocess.cluster import ROOT, Cluster, free_port
from tests.waiting import eventually

pytestmark = [pytest.mark.multiprocess, pytest.mark.timeout(300)]


def test_the_script_serves_tls_keeps_beat_in_var_and_stops(mp: Cluster, tmp_path: Path) -> None:
    var = tmp_path / "var"
    port = free_port()
    env = {
        **mp.env,
        "PY": sys.executable,
        "POPPY_VAR_DIR": str(var),
        "TLS": "1",
        "PORT": str(port),
        "WEB_PROCESSES": "1",
        "CELERY_CONCURRENCY": "1",
        "GRACEFUL_SHUTDOWN_SECONDS": "2",
    }
    log = open(tmp_path / "serve.log", "wb")  # noqa: SIM115 - closed below
    script = subprocess.Popen(
        ["bash", str(ROOT / "scripts" / "serve-production.sh")],
        env=env,
        cwd=ROOT,
        stdout=log,
        stderr=log,
        start_new_session=True,
    )
    certificate = var / "tls" / "cert.pem"
    base = f"https://localhost:{port}"

    def trusted() -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(certificate))

    def ready() -> bool:
        if script.poll() is not None:
            raise AssertionError((tmp_path / "serve.log").read_text()[-4000:])
        try:
            return httpx.get(f"{base}/health/ready", verify=trusted()).status_code == 200
        except (httpx.HTTPError, OSError):
            return False

    try:
        eventually(ready, timeout=120, what="the script's server over TLS")
        document = httpx.get(f"{base}/.well-known/poppy.json", verify=trusted()).json()
        assert document["organization"]["domain"] == "localhost"
        eventually(
            lambda: any(var.glob("celerybeat-schedule*")), what="beat's schedule in the var dir"
        )
        # A client holding its TLS connection open (a desk tab's keep-alive) does not hold
        # the stop: uvicorn's graceful shutdown is bounded.
        idle = httpx.Client(verify=trusted())
        idle.get(f"{base}/health/live")
        os.kill(script.pid, signal.SIGTERM)  # the script alone: it stops what it started
        script.wait(timeout=90)
        idle.close()
    finally:
        if script.poll() is None:
            os.killpg(script.pid, signal.SIGKILL)
            script.wait(timeout=30)
        log.close()
    said = (tmp_path / "serve.log").read_text()
    assert "E301" not in said
    # Nothing it started outlives it (the workers and beat were stopped with uvicorn).
    left = subprocess.run(
        ["pgrep", "-s", str(script.pid)], capture_output=True, text=True
    ).stdout.split()
    assert left == [], said[-3000:]
