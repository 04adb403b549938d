"""Real processes on their own PostgreSQL database and Redis, the way production runs: ASGI
web processes (uvicorn or granian) and Celery workers.

The one launcher of the multiprocess tests and of ``bench/`` (latency, capacity, the kill
campaign): the benchmarks measure the very stack the tests prove correct.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import psycopg

from tests.waiting import eventually

ROOT = Path(__file__).resolve().parents[2]
PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"
APP = "example_project.asgi:application"
SERVERS = ("uvicorn", "granian")
#: uvicorn's ``--timeout-graceful-shutdown`` here: in-flight requests get this long after
#: SIGTERM (the tests stop web processes dozens of times; production gives its own).
GRACEFUL_SHUTDOWN_SECONDS = 2
#: The benchmarks' production mode: DEBUG off, production's lease and heartbeat (the tests
#: shorten them), throttles that run (a cache read and write per request) but never refuse.
BENCH_ENV = {
    "DJANGO_DEBUG": "0",
    "POPPY_LEASE_SECONDS": "30",
    "POPPY_HEARTBEAT_SECONDS": "10",
    "POPPY_THROTTLE_RATES": '{"conversation_start": "1000000/s", "message": "1000000/s"}',
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process and its live descendants (a server's worker processes)."""
    tick = os.sysconf("SC_CLK_TCK")
    parents: dict[int, int] = {}
    times: dict[int, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        parents[int(entry.name)] = int(fields[1])
        times[int(entry.name)] = (int(fields[11]) + int(fields[12])) / tick
    tree, grew = {pid}, True
    while grew:
        more = {child for child, parent in parents.items() if parent in tree} - tree
        tree |= more
        grew = bool(more)
    return sum(times.get(member, 0.0) for member in tree)


#: Migrated databases this process copies for its clusters, by what decides their apps.
_templates: dict[tuple[object, ...], str] = {}


def _drop_templates(pg: Any) -> None:
    for name in _templates.values():
        with contextlib.suppress(psycopg.Error):
            pg(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


class Cluster:
    """A database and a Redis server of its own, and the processes started on them.

    ``server``/``server_workers``/``app``: which ASGI server runs :meth:`web`, with how many
    processes, serving what. ``log_level``: ``"info"`` for the tests (a worker is ready once
    its log says so); the benchmarks run ``"warning"``, whose workers are not waited for
    (turns wait in the queue until the worker is up). ``env``: overrides for every process.
    ``pg_port``: the PostgreSQL server on 127.0.0.1 (another than the machine's: a private
    one a test stops, hangs or fills, :mod:`tests.private_postgres`).
    """

    def __init__(
        self,
        tmp: Path,
        *,
        name: str | None = None,
        env: dict[str, str] | None = None,
        server: str = "uvicorn",
        server_workers: int = 1,
        app: str = APP,
        log_level: str = "info",
        pg_port: int = 5432,
    ) -> None:
        if server not in SERVERS:
            raise ValueError(f"server {server!r} is not one of {SERVERS}")
        self.name = name or f"poppy_mp_{secrets.token_hex(4)}"
        self.tmp = tmp
        self.server = server
        self.server_workers = server_workers
        self.app = app
        self.log_level = log_level
        self.pg_port = pg_port
        self.pg_admin = f"postgresql://postgres@127.0.0.1:{pg_port}/postgres"
        self.redis_port = free_port()
        self.redis: subprocess.Popen[bytes] | None = None
        self.env = {
            **os.environ,
            "DATABASE_URL": self.database_url(self.name),
            "REDIS_URL": f"redis://127.0.0.1:{self.redis_port}/0",
            "POPPY_CELERY_QUEUE": f"{self.name}-turns",
            # The fake verifier, with the example project's explicit opt-in to run it with
            # DEBUG off (docs/testing.md): it is refused at run time otherwise.
            "POPPY_AUTHENTICATE": "poppy_django.verifier.fake.verify",
            "POPPY_ALLOW_FAKE_VERIFIER": "1",
            "POPPY_LEASE_SECONDS": "3",
            "POPPY_HEARTBEAT_SECONDS": "1",
            "POPPY_LOG_LEVEL": log_level.upper(),
            "POPPY_VAR_DIR": str(tmp),
            "PYTHONPATH": str(ROOT),
            "DJANGO_SETTINGS_MODULE": "example_project.settings",
            **(env or {}),
        }
        self.processes: dict[str, subprocess.Popen[bytes]] = {}

    def database_url(self, name: str) -> str:
        return f"postgres://postgres@127.0.0.1:{self.pg_port}/{name}"

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

        def listening() -> bool:
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.redis_port), timeout=0.5),
            ):
                return True
            return False

        eventually(listening, timeout=10, what="redis-server to listen")

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

    def pg(self, sql: str) -> list[tuple[Any, ...]]:
        """One statement on the server's maintenance database (autocommit)."""
        with psycopg.connect(self.pg_admin, autocommit=True) as conn:
            cursor = conn.execute(sql)
            return cursor.fetchall() if cursor.description else []

    def create(self, *, from_template: bool = True) -> None:
        """Redis up; the database (re)created, migrated.

        ``from_template``: a copy of a database this process migrated once for clusters of
        the same apps (``CREATE DATABASE ... TEMPLATE``, well under a second), instead of
        running every migration again for each cluster; False migrates this one itself
        (through whatever ``DATABASE_URL`` names, PgBouncer included).
        """
        self.start_redis()
        self.pg(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')
        if not from_template or self.pg_port != 5432:  # templates live on the machine's server
            self.pg(f'CREATE DATABASE "{self.name}"')
            self.manage("migrate", "-v0")
            return
        self.pg(f'CREATE DATABASE "{self.name}" TEMPLATE "{self._template()}"')

    def _template(self) -> str:
        """This process's migrated database for this cluster's apps, made on first use."""
        # What decides what migrate makes: the example project's INSTALLED_APPS (its
        # development authority) and its demo accounts.
        switches = ("DJANGO_DEBUG", "POPPY_DEV_AUTHORITY", "ACME_DEMO_ACCOUNTS")
        key = tuple(self.env.get(n, "") for n in switches)
        key += ("REDIS_URL" in self.env,)
        if key not in _templates:
            name = f"poppy_mp_template_{os.getpid()}_{len(_templates)}"
            self.pg(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            self.pg(f'CREATE DATABASE "{name}"')
            self.manage("migrate", "-v0", env={"DATABASE_URL": self.database_url(name)})
            if not _templates:
                atexit.register(_drop_templates, self.pg)
            _templates[key] = name
        return _templates[key]

    def destroy(self) -> None:
        self.stop_all()
        self.stop_redis()
        self.pg(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')

    def manage(self, *args: str, env: dict[str, str] | None = None) -> str:
        result = subprocess.run(
            [sys.executable, str(ROOT / "manage.py"), *args],
            env={**self.env, **(env or {})},
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
        )
        if result.returncode != 0:
            raise RuntimeError(f"manage.py {args} failed:\n{result.stdout}\n{result.stderr}")
        return result.stdout

    def _spawn(
        self, name: str, argv: list[str], env: dict[str, str] | None = None
    ) -> subprocess.Popen[bytes]:
        """A process in a session of its own: a signal reaches its children too.

        A name is one running process: a second under it would drop the first from
        :attr:`processes`, and :meth:`stop_all` would leave it running after the cluster.
        """
        running = self.processes.get(name)
        if running is not None and running.poll() is None:
            raise ValueError(f"{name!r} names a process that runs (pid {running.pid})")
        log = open(self.tmp / f"{name}.log", "wb")  # noqa: SIM115 - closed with the process
        process = subprocess.Popen(
            argv,
            # Its database sessions carry its name (libpq's PGAPPNAME): see sessions_ended.
            env={**self.env, "PGAPPNAME": name, **(env or {})},
            cwd=ROOT,
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
        self.processes[name] = process
        return process

    def _server_argv(
        self, port: int, tls: tuple[Path, Path] | None = None, access_log: bool = False
    ) -> list[str]:
        common = ["--host", "127.0.0.1", "--port", str(port), "--workers"]
        common += [str(self.server_workers), "--log-level", self.log_level, "--backlog", "8192"]
        if self.server == "granian":
            # ASGI without the lifespan protocol, which Django does not speak ("asgi" tries it
            # and logs that it errored); no WebSocket routes; the access log is off by default.
            return [
                sys.executable,
                "-m",
                "granian",
                "--interface",
                "asginl",
                "--no-ws",
                *common,
                self.app,
            ]
        if tls is not None:
            common += ["--ssl-certfile", str(tls[0]), "--ssl-keyfile", str(tls[1])]
        return [
            *[sys.executable, "-m", "uvicorn", self.app, *common],
            *([] if access_log else ["--no-access-log"]),
            *["--timeout-keep-alive", "60"],
            # As docs/deployment.md advises: a stop is bounded. Without it a TLS connection
            # whose idle client never answers the server's close_notify holds the process
            # for asyncio's SSL shutdown timeout (30 s), past stop_all's grace.
            *["--timeout-graceful-shutdown", str(GRACEFUL_SHUTDOWN_SECONDS)],
        ]

    def web(
        self,
        name: str,
        *,
        port: int | None = None,
        env: dict[str, str] | None = None,
        tls: tuple[Path, Path] | None = None,
        access_log: bool = False,
    ) -> str:
        """Start a web process (``env``: overrides for it alone); its base URL once it answers.

        ``tls``: (certificate, key) PEM files, served over https (uvicorn only);
        ``access_log``: log every request (a test reading the log for 5xx answers).
        """
        if tls is not None and self.server != "uvicorn":
            raise ValueError("tls is served by uvicorn only")
        port = port or free_port()
        self._spawn(name, self._server_argv(port, tls, access_log), env)
        url = f"{'https' if tls else 'http'}://127.0.0.1:{port}"

        def answering() -> bool:
            with contextlib.suppress(httpx.HTTPError):
                # Readiness only: the certificate names the public host, not 127.0.0.1.
                httpx.get(f"{url}/poppy/conversations/x", timeout=1, verify=False)
                return True
            self.check_alive(name)
            return False

        eventually(answering, timeout=60, what=lambda: f"{name} to start: {self.log(name)}")
        return url

    def worker(
        self,
        name: str,
        app: str = "example_project",
        options: Sequence[str] = (),
        env: dict[str, str] | None = None,
    ) -> subprocess.Popen[bytes]:
        """Start a Celery worker (solo pool: a kill takes the whole worker down).

        ``options``: more ``celery worker`` options, after the defaults so they win
        (``["--pool=prefork", "--concurrency=2"]``); ``env``: overrides for it alone.
        """
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
                f"--loglevel={self.log_level.upper()}",
                *options,
            ],
            env,
        )

        def ready() -> bool:
            if b"ready" in (self.tmp / f"{name}.log").read_bytes():
                return True
            self.check_alive(name)
            return False

        if self.log_level == "info":  # only then does the worker say it is ready
            eventually(ready, timeout=30, what=lambda: f"{name} to start: {self.log(name)}")
        return process

    def llm(
        self, name: str = "llm", *, ttft: float = 0.5, tokens: int = 20, rate: float = 20.0
    ) -> str:
        """Start the LLM-shaped local model (bench/llm_endpoint.py); its origin once it listens.

        Processes started afterwards reach it as their model: ``POPPY_MODEL`` is set to
        ``openai-chat:local`` and ``OPENAI_BASE_URL`` to ``<origin>/v1`` in :attr:`env`.
        """
        argv = [sys.executable, str(ROOT / "bench" / "llm_endpoint.py"), "--ttft", str(ttft)]
        self._spawn(name, [*argv, "--tokens", str(tokens), "--rate", str(rate)])

        def printed_url() -> str | None:
            printed = (self.tmp / f"{name}.log").read_text(errors="replace")
            if "OPENAI_BASE_URL=" in printed:
                return printed.partition("OPENAI_BASE_URL=")[2].split()[0]
            self.check_alive(name)
            return None

        base_url = eventually(printed_url, timeout=30, what=lambda: f"{name}: {self.log(name)}")
        model = {"POPPY_MODEL": "openai-chat:local", "OPENAI_API_KEY": "local"}
        self.env.update(model, OPENAI_BASE_URL=base_url)
        return base_url.removesuffix("/v1")

    def pid(self, name: str) -> int:
        return self.processes[name].pid

    def check_alive(self, name: str) -> None:
        if self.processes[name].poll() is not None:
            raise RuntimeError(f"{name} exited: {self.log(name)}")

    def kill(self, name: str) -> None:
        """SIGKILL: no cleanup, no ack, exactly like a machine losing power."""
        process = self.processes.pop(name)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)

    def exited(self, name: str, timeout: float = 30) -> int:
        """Wait for a process to exit by itself (a worker made to die); its exit status.

        Its database sessions have ended too when this returns (:meth:`sessions_ended`).
        """
        process = self.processes[name]
        try:
            status = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"{name} did not exit: {self.log(name)}") from None
        self.processes.pop(name)
        self.sessions_ended(name)
        return status

    def sessions_ended(self, name: str, timeout: float = 30) -> None:
        """Wait until PostgreSQL has ended the database sessions of a dead process: from then
        on whatever it had sent is committed or rolled back, and nothing more of it can be."""
        sql = (
            "SELECT count(*) FROM pg_stat_activity"
            f" WHERE datname = '{self.name}' AND application_name = '{name}'"
        )
        eventually(
            lambda: self.pg(sql) == [(0,)], timeout=timeout, what=f"{name}'s sessions to end"
        )

    def stop(self, name: str) -> None:
        """SIGTERM (SIGKILL after 10 s), to the process and its children; gone is fine."""
        process = self.processes.pop(name, None)
        if process is None:
            return
        for sig in (signal.SIGTERM, signal.SIGKILL):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, sig)
            try:
                process.wait(timeout=10)
                break
            except subprocess.TimeoutExpired:
                continue

    def stop_all(self, grace: float = 10) -> None:
        """:meth:`stop` for every process at once: SIGTERM to all, then SIGKILL to those
        still running after ``grace`` seconds in all (not ``grace`` for each in turn: a TLS
        web process can wait out its whole grace for clients that never close)."""
        processes = list(self.processes.values())
        self.processes.clear()
        for process in processes:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for process in processes:
            try:
                process.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)

    def log(self, name: str) -> str:
        return (self.tmp / f"{name}.log").read_text(errors="replace")[-4000:]


@contextlib.contextmanager
def cluster(tmp: Path, env: dict[str, str] | None = None) -> Iterator[Cluster]:
    running = Cluster(tmp, env=env)
    running.create()
    try:
        yield running
    finally:
        running.destroy()
