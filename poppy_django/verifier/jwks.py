"""The issuer's signing keys: an inline JWKS, or a JWKS URL through pyjwt's ``PyJWKClient``.

``PyJWKClient`` fetches (http(s) only, no redirects, with a timeout), caches the set for
``JWKS_CACHE_SECONDS`` and, on an unknown ``kid``, refetches at most once per
``JWKS_MIN_REFRESH_SECONDS`` (its cooldown), with concurrent requests waiting on one fetch:
forged ``kid`` values cannot turn the verifier into a fetch storm against the issuer.

Added here, because ``PyJWKClient`` does not do it: when a refetch fails (the issuer is down),
the last good keys stay in use and the next attempt waits ``JWKS_MIN_REFRESH_SECONDS``, so an
issuer outage neither refuses every token nor makes every request wait on a timeout.

Whatever the source, a key is used only with an algorithm it fits (:func:`_fit`): symmetric
keys and keys for other uses never count.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, rsa
from jwt import PyJWK, PyJWKClient, PyJWKSet
from jwt.exceptions import PyJWKClientConnectionError, PyJWKClientError, PyJWTError

from poppy_django.verifier.jwk import JWKError, PublicKey, public_jwk, public_key_for

logger = logging.getLogger("poppy_django.auth")

_PRIVATE_KEY_TYPES = (
    ec.EllipticCurvePrivateKey,
    rsa.RSAPrivateKey,
    ed25519.Ed25519PrivateKey,
    ed448.Ed448PrivateKey,
)


class KeySource(Protocol):
    """Where the verifier finds the key that signed a token."""

    def key(self, kid: str | None, alg: str) -> PublicKey | None:
        """The public key for ``kid`` usable with ``alg``, or None."""
        ...


@functools.lru_cache(maxsize=64)  # issuer keys only: a few, stable while the set is cached
def _fit(jwk: PyJWK, alg: str) -> PublicKey | None:
    """The public key of ``jwk`` if it is a signature key for exactly ``alg``.

    The JWK's ``alg`` (or the one pyjwt infers from its type and curve) must be ``alg``; the
    curve, RSA size and key type are checked again by :func:`public_key_for`.
    """
    if jwk.key_type not in ("EC", "RSA", "OKP") or jwk.public_key_use not in ("sig", None):
        return None
    if jwk.algorithm_name != alg:
        return None
    key: Any = jwk.key
    if isinstance(key, _PRIVATE_KEY_TYPES):
        key = key.public_key()
    try:
        return public_key_for({**public_jwk(key), "alg": alg}, alg)
    except JWKError:
        return None


def _select(keys: Iterable[PyJWK], kid: str | None, alg: str) -> PublicKey | None:
    """The key named ``kid``; without a kid, only when the set holds exactly one key."""
    candidates = list(keys) if kid is None else [k for k in keys if k.key_id == kid]
    if kid is None and len(candidates) != 1:
        return None
    for candidate in candidates:
        found = _fit(candidate, alg)
        if found is not None:
            return found
    return None


def parse_jwks(document: Mapping[str, Any]) -> list[PyJWK]:
    """The usable keys of a JWKS document (pyjwt skips the ones it cannot load)."""
    try:
        return list(PyJWKSet.from_dict(dict(document)))
    except PyJWTError:
        return []


class StaticKeys:
    """An inline JWKS from settings (or the development authority's key).

    Keys found are remembered (at most one per configured key and algorithm); a miss is not:
    ``kid`` arrives before any signature is checked, so remembering misses would let anyone
    grow the process's memory with made-up ``kid`` values.
    """

    def __init__(self, document: Mapping[str, Any]) -> None:
        self._keys = parse_jwks(document)
        self._kids = {key.key_id for key in self._keys}
        self._found: dict[tuple[str | None, str], PublicKey] = {}

    def key(self, kid: str | None, alg: str) -> PublicKey | None:
        found = self._found.get((kid, alg))
        if found is None and (kid is None or kid in self._kids):
            found = _select(self._keys, kid, alg)
            if found is not None:
                self._found[(kid, alg)] = found
        return found


class RemoteKeys:
    """A JWKS URL: ``PyJWKClient``, plus the last good keys while the issuer is unreachable."""

    def __init__(
        self, url: str, *, max_age: float = 300, min_refresh: float = 30, timeout: float = 5
    ) -> None:
        if not url.startswith(("https://", "http://")):
            raise ValueError("A JWKS URL is http(s).")
        self.url = url
        self.min_refresh = min_refresh
        self.client = PyJWKClient(
            url,
            lifespan=max(max_age, 0.001),  # PyJWKClient wants a positive lifespan
            timeout=timeout,
            cooldown_duration=min_refresh,
            headers={"Accept": "application/json"},
        )
        self._last_good: list[PyJWK] = []
        self._failed_at: float | None = None
        self._retrying = threading.Lock()

    def key(self, kid: str | None, alg: str) -> PublicKey | None:
        failed_at = self._failed_at
        if failed_at is not None and time.monotonic() - failed_at < self.min_refresh:
            return _select(self._last_good, kid, alg)  # the issuer just failed: not yet again
        if failed_at is not None and not self._retrying.acquire(blocking=False):
            return _select(self._last_good, kid, alg)  # another request is retrying
        try:
            keys = self._ask(kid)
        finally:
            if failed_at is not None:
                self._retrying.release()
        return _select(self._last_good if keys is None else keys, kid, alg)

    def _ask(self, kid: str | None) -> list[PyJWK] | None:
        """The client's keys for ``kid`` ([] when it has none); None when fetching failed."""
        try:
            if kid is None:
                keys = list(self.client.get_jwk_set())
            else:
                keys = [self.client.get_signing_key(kid)]
        except PyJWKClientConnectionError as exc:
            self._failed(exc)
            return None
        except PyJWKClientError as exc:
            if self._cached() is None:  # not a JSON object: the fetch failed
                self._failed(exc)
                return None
            keys = []  # a good set without this kid, even after the refetch allowed
        except Exception as exc:  # a malformed document: keep the old keys, never fail
            self._failed(exc)
            return None
        cached = self._cached()
        if cached is not None:
            self._last_good = list(cached)
        self._failed_at = None
        return keys

    def _cached(self) -> PyJWKSet | None:
        """The set the client holds, while it is fresh."""
        cache = self.client.jwk_set_cache
        return cache.get() if cache is not None else None

    def _failed(self, exc: Exception) -> None:
        logger.warning("Fetching the issuer JWKS from %s failed: %s", self.url, exc)
        self._failed_at = time.monotonic()
        return None
