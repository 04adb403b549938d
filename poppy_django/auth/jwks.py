"""The issuer's signing keys: an inline JWKS, or a JWKS URL fetched, cached and refreshed.

A token naming an unknown ``kid`` triggers a refetch (key rotation), but at most one fetch per
``min_refresh`` seconds per process, and concurrent requests share that one fetch: forged
``kid`` values cannot turn the verifier into a fetch storm against the issuer.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from poppy_django.auth.jwk import JWKError, PublicKey, public_key_for

logger = logging.getLogger("poppy_django.auth")

#: A JWKS document larger than this is refused (a JWKS is a few kilobytes).
MAX_JWKS_BYTES = 512 * 1024

Fetcher = Callable[[str, float], Mapping[str, Any]]


class KeySource(Protocol):
    """Where the verifier finds the key that signed a token."""

    def key(self, kid: str | None, alg: str) -> PublicKey | None:
        """The public key for ``kid`` usable with ``alg``, or None."""
        ...


def parse_jwks(document: Mapping[str, Any]) -> dict[str | None, list[dict[str, Any]]]:
    """Signature keys of a JWKS by ``kid``; symmetric keys and ``use`` other than sig dropped."""
    keys: dict[str | None, list[dict[str, Any]]] = {}
    entries = document.get("keys")
    if not isinstance(entries, list):
        raise ValueError("A JWKS has a list of keys.")
    for entry in entries:
        if not isinstance(entry, dict) or entry.get("kty") not in ("EC", "RSA", "OKP"):
            continue
        if entry.get("use", "sig") != "sig":
            continue
        kid = entry.get("kid")
        keys.setdefault(kid if isinstance(kid, str) else None, []).append(entry)
    return keys


def _select(keys: dict[str | None, list[dict[str, Any]]], kid: str | None, alg: str) -> Any:
    if kid is None:
        # No kid: only unambiguous when the set holds exactly one key.
        candidates = [entry for entries in keys.values() for entry in entries]
        if len(candidates) != 1:
            return None
    else:
        candidates = keys.get(kid, [])
    for entry in candidates:
        try:
            return public_key_for(entry, alg, allow_private=True)
        except JWKError:
            continue
    return None


class StaticKeys:
    """An inline JWKS from settings (or the development authority's key).

    Keys found are remembered (at most one per configured key and algorithm); a miss is not:
    ``kid`` arrives before any signature is checked, so remembering misses would let anyone
    grow the process's memory with made-up ``kid`` values.
    """

    def __init__(self, document: Mapping[str, Any]) -> None:
        self._keys = parse_jwks(document)
        self._found: dict[tuple[str | None, str], PublicKey] = {}

    def key(self, kid: str | None, alg: str) -> PublicKey | None:
        found = self._found.get((kid, alg))
        if found is None and (kid is None or kid in self._keys):
            found = _select(self._keys, kid, alg)
            if found is not None:
                self._found[(kid, alg)] = found
        return found


def fetch_json(url: str, timeout: float) -> Mapping[str, Any]:
    """GET a JSON document (no redirects to other schemes, bounded size)."""
    request = urllib.request.Request(url, headers={"Accept": "application/json"})  # noqa: S310
    with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310
        body = response.read(MAX_JWKS_BYTES + 1)
    if len(body) > MAX_JWKS_BYTES:
        raise ValueError("JWKS too large")
    document = json.loads(body)
    if not isinstance(document, dict):
        raise ValueError("A JWKS is a JSON object")
    return document


class RemoteKeys:
    """A JWKS URL: cached ``max_age`` seconds; refetched on an unknown kid, rate-limited."""

    def __init__(
        self,
        url: str,
        *,
        max_age: float = 300,
        min_refresh: float = 30,
        timeout: float = 5,
        fetcher: Fetcher = fetch_json,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not url.startswith(("https://", "http://")):
            raise ValueError("A JWKS URL is http(s).")
        self.url = url
        self.max_age = max_age
        self.min_refresh = min_refresh
        self.timeout = timeout
        self.fetcher = fetcher
        self.clock = clock
        self.fetches = 0
        self._keys: dict[str | None, list[dict[str, Any]]] = {}
        self._fetched_at: float | None = None
        self._attempted_at: float | None = None
        self._lock = threading.Lock()

    def key(self, kid: str | None, alg: str) -> PublicKey | None:
        now = self.clock()
        if self._fetched_at is None or now - self._fetched_at >= self.max_age:
            self._refresh(now)
        found = _select(self._keys, kid, alg)
        if found is None and kid is not None and kid not in self._keys:
            # Maybe the issuer rotated its keys: look again, if we have not just looked.
            self._refresh(now)
            found = _select(self._keys, kid, alg)
        return found

    def _refresh(self, now: float) -> None:
        attempted = self._attempted_at
        if attempted is not None and now - attempted < self.min_refresh:
            return
        with self._lock:
            # Another thread may have fetched while we waited for the lock.
            if self._attempted_at != attempted:
                return
            self._attempted_at = now
            self.fetches += 1
            try:
                document = self.fetcher(self.url, self.timeout)
                keys = parse_jwks(document)
            except Exception as exc:  # the old keys stay in use; never fail the process
                logger.warning("Fetching the issuer JWKS from %s failed: %s", self.url, exc)
                return
            self._keys = keys
            self._fetched_at = now
