"""A private PgBouncer (Debian's ``pgbouncer``) in transaction pooling mode before the local
PostgreSQL: its own configuration, auth file, log and port, stopped afterwards.

Used by the tests that prove poppy-django runs behind PgBouncer (docs/deployment.md,
"Behind PgBouncer") and by ``bench/inflight.py --pgbouncer``.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg

from tests.waiting import eventually

PG_HOST, PG_PORT = "127.0.0.1", 5432


@dataclass(frozen=True)
class PgBouncer:
    port: int
    pool_size: int
    directory: Path
    pid: int

    def url(self, database: str, user: str = "postgres") -> str:
        """A ``DATABASE_URL`` reaching ``database`` through this PgBouncer."""
        return f"postgres://{user}@127.0.0.1:{self.port}/{database}"

    def show(self, what: str) -> list[tuple[object, ...]]:
        """``SHOW <what>`` on the admin console (``POOLS``, ``STATS``, ``SERVERS``...)."""
        with psycopg.connect(
            f"postgresql://postgres@127.0.0.1:{self.port}/pgbouncer", autocommit=True
        ) as conn:
            # The admin console speaks the simple query protocol only.
            return conn.execute(f"SHOW {what}", prepare=False).fetchall()

    def log(self) -> str:
        return (self.directory / "pgbouncer.log").read_text(errors="replace")[-4000:]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _config(directory: Path, port: int, pool_size: int, max_client_conn: int, strict: bool) -> str:
    # Strict: every server connection is reset (DISCARD ALL) after every transaction, so
    # anything that leans on a session across transactions — a WITH HOLD cursor, a prepared
    # statement, a session SET, an advisory lock — fails at once instead of under load, when
    # a client's next transaction lands on another server connection.
    reset = "server_reset_query = DISCARD ALL\nserver_reset_query_always = 1\n" if strict else ""
    return f"""\
[databases]
* = host={PG_HOST} port={PG_PORT}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {port}
unix_socket_dir =
pool_mode = transaction
default_pool_size = {pool_size}
max_client_conn = {max_client_conn}
auth_type = trust
auth_file = {directory}/userlist.txt
admin_users = postgres
logfile = {directory}/pgbouncer.log
pidfile = {directory}/pgbouncer.pid
; psycopg and Django send no startup options PgBouncer would refuse; libpq's may.
ignore_startup_parameters = extra_float_digits,options
{reset}"""


@contextlib.contextmanager
def running(
    pool_size: int = 10, max_client_conn: int = 4000, *, strict: bool = False
) -> Iterator[PgBouncer]:
    """A PgBouncer on a free port; stopped (and its directory removed) on exit.

    ``pool_size``: server connections per database and user (``default_pool_size``).
    ``strict``: reset every server connection after every transaction (see ``_config``).

    PgBouncer refuses to run as root: as root it runs as the ``postgres`` user (``-u``),
    which then owns its directory.
    """
    binary = shutil.which("pgbouncer") or shutil.which("pgbouncer", path="/usr/sbin")
    if binary is None:
        raise RuntimeError("pgbouncer is not installed (scripts/ensure-services.sh installs it)")
    directory = Path(tempfile.mkdtemp(prefix="poppy-pgbouncer-"))
    port = _free_port()
    (directory / "userlist.txt").write_text('"postgres" ""\n')
    (directory / "pgbouncer.ini").write_text(
        _config(directory, port, pool_size, max_client_conn, strict)
    )
    argv = [binary, str(directory / "pgbouncer.ini")]
    if os.geteuid() == 0:
        postgres = pwd.getpwnam("postgres")
        for path in (directory, *directory.iterdir()):
            os.chown(path, postgres.pw_uid, postgres.pw_gid)
        argv[1:1] = ["-u", "postgres"]
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    bouncer = PgBouncer(port, pool_size, directory, process.pid)
    try:
        _wait_until_listening(process, port, directory)
        yield bouncer
    finally:
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGINT)  # a fast shutdown: clients are cut
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        shutil.rmtree(directory, ignore_errors=True)


def _wait_until_listening(process: subprocess.Popen[bytes], port: int, directory: Path) -> None:
    def listening() -> bool:
        if process.poll() is not None:
            log = directory / "pgbouncer.log"
            told = log.read_text(errors="replace") if log.exists() else ""
            stderr = process.stderr.read().decode(errors="replace") if process.stderr else ""
            raise RuntimeError(f"pgbouncer exited: {stderr}{told}")
        with (
            contextlib.suppress(OSError),
            socket.create_connection(("127.0.0.1", port), timeout=0.5),
        ):
            return True
        return False

    eventually(listening, timeout=15, what="pgbouncer to listen")
