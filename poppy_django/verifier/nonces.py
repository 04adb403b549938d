"""Server-provided DPoP nonces (RFC 9449 §8) that every process can issue and check.

A nonce is the index of a time window plus an HMAC of it: no state is stored, any process
with the same secret (derived from ``SECRET_KEY`` by default) accepts it, and it rotates by
itself. A nonce stays valid in its window and the next one, so a client that just received
one is never refused for a window boundary.
"""

from __future__ import annotations

import base64
import hmac
import math
import re

from django.utils.crypto import salted_hmac

from poppy_django.verifier.jwk import b64url

SALT = "poppy_django.auth.nonces"
#: 8 bytes of window index + 16 bytes of MAC, base64url: 32 characters.
NONCE_RE = re.compile(r"[A-Za-z0-9_-]{32}")


def _mac(window: int, secret: str | None) -> bytes:
    return salted_hmac(SALT, str(window), secret=secret, algorithm="sha256").digest()[:16]


def _window(now: float, lifetime: float) -> int:
    return math.floor(now / lifetime)


def issue(now: float, *, lifetime: float, secret: str | None = None) -> str:
    """The current nonce."""
    window = _window(now, lifetime)
    return b64url(window.to_bytes(8, "big", signed=True) + _mac(window, secret))


def is_valid(nonce: object, now: float, *, lifetime: float, secret: str | None = None) -> bool:
    """True for a nonce of the current or the previous window, issued with this secret."""
    if not isinstance(nonce, str) or not NONCE_RE.fullmatch(nonce):
        return False
    raw = base64.urlsafe_b64decode(nonce)
    window = int.from_bytes(raw[:8], "big", signed=True)
    if window not in (_window(now, lifetime), _window(now, lifetime) - 1):
        return False
    return hmac.compare_digest(raw[8:], _mac(window, secret))
