"""The verifier's two bounded caches: what changes per request is checked per request.

A token's signature is checked once (:class:`VerifiedTokens`, until its ``exp`` or the key
cache's age), and a client's proof header once (:class:`ProofKeys`: its key and thumbprint).
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from poppy_django.verifier.jwk import PublicKey


class VerifiedTokens:
    """Verified token claims by token hash, bounded LRU: a token's signature is checked once.

    Only tokens that passed the signature, ``iss`` and ``aud`` checks enter, so callers
    without credentials cannot fill it. An entry is kept until the token expires, and never
    longer than ``max_age`` (the JWKS cache time: a retired key stops counting by then).
    Time claims, the proof, the session and the replay cache are still checked per request.
    """

    def __init__(self, size: int, max_age: float) -> None:
        self.size = size
        self.max_age = max_age
        self._entries: OrderedDict[bytes, tuple[float, dict[str, Any]]] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def key(token: str, audiences: tuple[str, ...]) -> bytes:
        return hashlib.sha256("\x00".join((token, *audiences)).encode()).digest()

    def get(self, key: bytes, now: float) -> dict[str, Any] | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            if entry[0] <= now:
                del self._entries[key]
                return None
            self._entries.move_to_end(key)
            return entry[1]

    def put(self, key: bytes, claims: dict[str, Any], now: float, leeway: float) -> None:
        if self.size <= 0:
            return
        until = min(float(claims["exp"]) + leeway, now + self.max_age)
        with self._lock:
            self._entries[key] = (until, claims)
            self._entries.move_to_end(key)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)


@dataclass(frozen=True)
class ProofKey:
    """What a proof's checked header gives: its ``alg``, public key and key thumbprint."""

    alg: str
    key: PublicKey
    jkt: str


class ProofKeys:
    """Checked proof headers by their encoded segment, bounded LRU: a client's header is
    parsed, its key fitted to its ``alg`` and thumbprinted once, not on every request.

    A client signs every proof with one header (``typ``, ``alg``, ``jwk``), so the segment
    repeats byte for byte, and what the header checks make of it depends on nothing else
    (the verifier's options are fixed for its life): a hit is exactly what the checks would
    give. The signature and every claim are still checked per request. Only headers of
    proofs that verified and matched a verified token's ``cnf.jkt`` enter, so callers
    without credentials cannot fill it.
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self._entries: OrderedDict[str, ProofKey] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, segment: str) -> ProofKey | None:
        with self._lock:
            entry = self._entries.get(segment)
            if entry is not None:
                self._entries.move_to_end(segment)
            return entry

    def put(self, segment: str, proof_key: ProofKey) -> None:
        if self.size <= 0:
            return
        with self._lock:
            self._entries[segment] = proof_key
            self._entries.move_to_end(segment)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)
