"""Real processes for the tests that are about them: uvicorn web processes and Celery workers
against their own PostgreSQL database and Redis, the way production runs.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psycopg

ROOT = Path(__file__).resolve().parents[2]
PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Cluster:
    """A database and a Redis server of its own, and the processes started on them."""

    def __init__(self, tmp: Path) -> None:
        self.name = f"poppy_mp_{secrets.token_hex(4)}"
        self.tmp = tmp
        self.redis_port = free_port()
        self.redis: subprocess.Popen[bytes] | None = None
        self.env = {
            **os.environ,
            "DATABASE_URL": f"postgres://postgres@127.0.0.1:5432/{self.name}",
            "REDIS_URL": f"redis://127.0.0.1:{self.redis_port}/0",
            "POPPY_CELERY_QUEUE": f"{self.name}-turns",
            "POPPY_AUTHENTICATE": "poppy_django.auth.fake.verify",
            "POPPY_LEASE_SECONDS": "3",
            "POPPY_HEARTBEAT_SECONDS": "1",
            "POPPY_VAR_DIR": str(tmp),
            "PYTHONPATH": str(ROOT),
            "DJANGO_SETTINGS_MODULE": "example_project.settings",
        }
        self.processes: dict[str, subprocess.Popen[bytes]] = {}

    def start_redis(self) -> None:
        """A private Redis (no persistence), so a test may restart it under live traffic."""
        self.redis = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(self.redis_port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.redis_port), timeout=0.5),
            ):
                return
            time.sleep(0.1)
        raise RuntimeError("redis-server did not start")

    def subscribed(self) -> bool:
        """Whether a web process holds a Redis subscription (it has a waiting reader)."""
        import redis

        client = redis.Redis(port=self.redis_port)
        try:
            return bool(client.pubsub_channels())
        except redis.ConnectionError:
            return False
        finally:
            client.close()

    def stop_redis(self) -> None:
        if self.redis is not None:
            self.redis.kill()
            self.redis.wait(timeout=10)
            self.redis = None

    def create(self) -> None:
        self.start_redis()
        with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{self.name}"')
        self.manage("migrate", "-v0")

    def destroy(self) -> None:
        for name in list(self.processes):
            self.stop(name)
        self.stop_redis()
        with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')

    def manage(self, *args: str) -> str:
        result = subprocess.run(
            [sys.executable, str(ROOT / "manage.py"), *args],
            env=self.env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if result.returncode != 0:
            raise RuntimeError(f"manage.py {args} failed:\n{result.stdout}\n{result.stderr}")
        return result.stdout

    def _spawn(self, name: str, argv: list[str]) -> subprocess.Popen[bytes]:
        log = open(self.tmp / f"{name}.log", "wb")  # noqa: SIM115 - closed with the process
        process = subprocess.Popen(argv, env=self.env, cwd=ROOT, stdout=log, stderr=log)
        self.processes[name] = process
        return process

    def web(self, name: str) -> str:
        """Start a uvicorn process; its base URL once it answers."""
        port = free_port()
        self._spawn(
            name,
            [
                sys.executable,
                "-m",
                "uvicorn",
                "example_project.asgi:application",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--no-access-log",
            ],
        )
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.HTTPError):
                httpx.get(f"{url}/poppy/conversations/x", timeout=1)
                return url
            self.check_alive(name)
            time.sleep(0.2)
        raise RuntimeError(f"{name} did not start: {self.log(name)}")

    def worker(self, name: str, app: str = "example_project") -> subprocess.Popen[bytes]:
        """Start a Celery worker (solo pool: a kill takes the whole worker down)."""
        process = self._spawn(
            name,
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                app,
                "worker",
                "--pool=solo",
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
                "-Q",
                self.env["POPPY_CELERY_QUEUE"],
                "-n",
                f"{name}@%h",
                "--loglevel=INFO",
            ],
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if b"ready" in (self.tmp / f"{name}.log").read_bytes():
                return process
            self.check_alive(name)
            time.sleep(0.2)
        raise RuntimeError(f"{name} did not start: {self.log(name)}")

    def check_alive(self, name: str) -> None:
        if self.processes[name].poll() is not None:
            raise RuntimeError(f"{name} exited: {self.log(name)}")

    def kill(self, name: str) -> None:
        """SIGKILL: no cleanup, no ack, exactly like a machine losing power."""
        process = self.processes.pop(name)
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=10)

    def stop(self, name: str) -> None:
        process = self.processes.pop(name)
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)

    def log(self, name: str) -> str:
        return (self.tmp / f"{name}.log").read_text(errors="replace")[-4000:]


@contextlib.contextmanager
def cluster(tmp: Path) -> Iterator[Cluster]:
    running = Cluster(tmp)
    running.create()
    try:
        yield running
    finally:
        running.destroy()
