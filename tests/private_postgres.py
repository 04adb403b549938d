"""A private PostgreSQL server (this machine's own binaries) that a test may stop and start
again under a running web process: the database server going away, not a database dropped.
Or hang: every process of the server stopped by SIGSTOP (:meth:`PrivatePostgres.hung`), so
connections stay open and nothing answers, as a server stuck on its disk or in swap.

Its data directory, socket and log live in a temporary directory, removed afterwards.
PostgreSQL refuses to run as root: as root its commands run as the ``postgres`` user, which
then owns the directory.
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


def _bindir() -> Path:
    """Where initdb and pg_ctl are (``pg_config --bindir``; Debian keeps them off PATH)."""
    found = shutil.which("pg_ctl")
    if found:
        return Path(found).resolve().parent
    config = shutil.which("pg_config")
    if config is None:
        raise RuntimeError("PostgreSQL's server binaries (pg_ctl, initdb) are not installed")
    return Path(subprocess.run([config, "--bindir"], capture_output=True, text=True).stdout.strip())


@dataclass(frozen=True)
class PrivatePostgres:
    directory: Path
    port: int
    #: Server settings (``-c name=value``), e.g. ``{"max_connections": "300"}``.
    settings: tuple[tuple[str, str], ...] = ()

    def url(self, database: str) -> str:
        """A ``DATABASE_URL`` for ``database`` on this server."""
        return f"postgres://postgres@127.0.0.1:{self.port}/{database}"

    def _run(self, *argv: str) -> None:
        prefix = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        result = subprocess.run(
            [*prefix, *argv], capture_output=True, text=True, timeout=120, cwd=self.directory
        )
        if result.returncode != 0:
            raise RuntimeError(f"{argv[0]} failed:\n{result.stdout}\n{result.stderr}")

    def start(self) -> None:
        """Start the server and wait until it accepts connections (``pg_ctl -w``)."""
        options = f"-p {self.port} -k {self.directory} -c listen_addresses=127.0.0.1 -c fsync=off"
        options += "".join(f" -c {name}={value}" for name, value in self.settings)
        pg_ctl = str(_bindir() / "pg_ctl")
        data, log = self.directory / "data", self.directory / "server.log"
        self._run(pg_ctl, "-D", str(data), "-o", options, "-l", str(log), "-w", "start")

    def stop(self) -> None:
        """Stop it at once (``-m immediate``: what a crashed or killed server looks like)."""
        data = self.directory / "data"
        self._run(str(_bindir() / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop")

    def processes(self) -> list[int]:
        """The postmaster's pid and every process it started (backends, background workers)."""
        postmaster = int((self.directory / "data" / "postmaster.pid").read_text().split()[0])
        children: dict[int, list[int]] = {}
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                with contextlib.suppress(OSError):
                    parent = int((entry / "stat").read_text().rpartition(")")[2].split()[1])
                    children.setdefault(parent, []).append(int(entry.name))
        found, frontier = [postmaster], [postmaster]
        while frontier:
            frontier = [child for pid in frontier for child in children.get(pid, [])]
            found += frontier
        return found

    @contextlib.contextmanager
    def hung(self) -> Iterator[None]:
        """Every process of the server stopped (SIGSTOP) for the block, then continued."""
        stopped = self.processes()
        for pid in stopped:
            os.kill(pid, signal.SIGSTOP)
        try:
            yield
        finally:
            for pid in stopped:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def running(**settings: str) -> Iterator[PrivatePostgres]:
    """A new server (trust authentication, user ``postgres``) on a free port, started;
    ``settings`` are its server settings (``max_connections="300"``)."""
    directory = Path(tempfile.mkdtemp(prefix="poppy-postgres-"))
    if os.geteuid() == 0:
        owner = pwd.getpwnam("postgres")
        os.chown(directory, owner.pw_uid, owner.pw_gid)
    server = PrivatePostgres(directory, _free_port(), tuple(settings.items()))
    initdb = str(_bindir() / "initdb")
    server._run(initdb, "-D", str(directory / "data"), "-A", "trust", "-U", "postgres", "-N")
    server.start()
    try:
        yield server
    finally:
        with contextlib.suppress(RuntimeError):
            server.stop()  # already stopped is fine
        shutil.rmtree(directory, ignore_errors=True)
