"""A TCP forwarder between one process and the cluster's Redis, which a test severs and
mends: that process alone cut off from Redis while the others reach it (a partition).

Severed, it closes every connection it carries and closes each new one at once, so the
process's Redis calls fail (after redis-py's own retries) rather than hang; mended, it
forwards again.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from types import TracebackType


class RedisCut:
    def __init__(self, redis_port: int) -> None:
        self.redis_port = redis_port
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._severed = threading.Event()
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, name="redis-cut", daemon=True).start()

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    def sever(self) -> None:
        self._severed.set()
        with self._lock:
            carried, self._open = self._open, set()
        for sock in carried:
            _close(sock)

    def mend(self) -> None:
        self._severed.clear()

    def close(self) -> None:
        self.sever()
        _close(self._listener)

    def __enter__(self) -> RedisCut:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:  # closed
                return
            if self._severed.is_set():
                _close(client)
                continue
            try:
                upstream = socket.create_connection(("127.0.0.1", self.redis_port), timeout=5)
                upstream.settimeout(None)
            except OSError:
                _close(client)
                continue
            with self._lock:
                self._open |= {client, upstream}
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=_pump, args=(source, sink), daemon=True).start()


def _pump(source: socket.socket, sink: socket.socket) -> None:
    """Bytes from ``source`` to ``sink`` until either closes, then both closed."""
    with contextlib.suppress(OSError):
        while data := source.recv(65536):
            sink.sendall(data)
    _close(source)
    _close(sink)


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()
