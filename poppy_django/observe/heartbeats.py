"""Each turn engine's heartbeat as a file on its host, for exec-style worker probes.

The engine's heartbeat thread renews its leases every ``HEARTBEAT_SECONDS``; each tick it
also touches one file of its own (``<host>-<pid>`` in ``POPPY["HEARTBEAT_DIR"]``). A probe
run on the same host (``manage.py poppy_worker_probe``, a container's exec health check)
passes while some live engine there has touched its file within the bound: a worker killed
outright stops touching it, a worker whose heartbeat thread hangs too. A file, not a row:
a database outage must not make every worker look dead and be restarted.
"""

from __future__ import annotations

import contextlib
import os
import socket
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from poppy_django.conf import poppy_settings


def directory() -> Path:
    configured = poppy_settings.HEARTBEAT_DIR
    return Path(configured) if configured else Path(tempfile.gettempdir()) / "poppy-heartbeats"


def _host() -> str:
    return socket.gethostname()[:64].replace("/", "_")


def _own_file() -> Path:
    return directory() / f"{_host()}-{os.getpid()}"


_last_beat: float | None = None
_beating_pid: int | None = None


def last_beat() -> float | None:
    """When this process's engine last beat (Unix time), None if it has none."""
    return _last_beat if _beating_pid == os.getpid() else None


def beat() -> None:
    """Say this process's engine is alive now (never fails the caller: a full disk or a
    missing directory only makes the probe fail, which is what it is for)."""
    global _last_beat, _beating_pid
    _last_beat, _beating_pid = time.time(), os.getpid()
    path = _own_file()
    try:
        path.touch()
    except FileNotFoundError:
        with contextlib.suppress(OSError):
            path.parent.mkdir(parents=True, exist_ok=True)
            path.touch()
    except OSError:
        pass


def stopped() -> None:
    """This process's engine stopped on purpose: its file goes."""
    global _beating_pid
    _beating_pid = None
    with contextlib.suppress(OSError):
        _own_file().unlink()


@dataclass(frozen=True)
class Engine:
    """An engine of this host, as its file tells: its pid, seconds since it beat, alive."""

    pid: int
    age: float
    alive: bool


def engines() -> list[Engine]:
    """The engines of this host that have a heartbeat file, the freshest first."""
    prefix = f"{_host()}-"
    now = time.time()
    found: list[Engine] = []
    with contextlib.suppress(FileNotFoundError):
        for path in directory().iterdir():
            pid = path.name.removeprefix(prefix)
            if not path.name.startswith(prefix) or not pid.isdigit():
                continue
            with contextlib.suppress(FileNotFoundError):
                age = max(0.0, now - path.stat().st_mtime)
                found.append(Engine(int(pid), age, process_alive(int(pid))))
    return sorted(found, key=lambda engine: engine.age)


def process_alive(pid: int) -> bool:
    """Whether a process of this host (this pid namespace) runs with that pid."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process: it exists
    return not _zombie(pid)


def _zombie(pid: int) -> bool:
    """A killed process not yet reaped (a worker's children, their parent killed with them,
    wait for a reaper that may be slow or absent in a container): it runs nothing."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False  # no /proc (not Linux): the signal's answer stands
    return stat.rpartition(")")[2].split()[:1] in (["Z"], ["X"])


def healthy(within: float) -> tuple[bool, str]:
    """Whether a live engine of this host beat within ``within`` seconds, and in words."""
    found = engines()
    fresh = [engine for engine in found if engine.alive and engine.age <= within]
    if fresh:
        return True, (
            f"{len(fresh)} engine(s) on {_host()} beat within {within:g} s "
            f"(the latest {fresh[0].age:.1f} s ago, pid {fresh[0].pid})"
        )
    if not found:
        return False, f"no engine on {_host()} has beaten (nothing in {directory()})"
    latest = found[0]
    state = "alive" if latest.alive else "gone"
    return False, (
        f"no live engine on {_host()} beat within {within:g} s; the latest beat "
        f"{latest.age:.1f} s ago (pid {latest.pid}, {state})"
    )
