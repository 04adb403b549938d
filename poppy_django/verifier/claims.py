"""What the DPoP proof's checks and the Session Token's share: the refusal they raise and
reading a compact JWS's header and claims strictly (finite numbers, bounded strings).

A refusal's ``reason`` is logged; for ``invalid_token`` it is also told, and so it is when
``told`` (a reason naming only public facts that tell the fix): :mod:`poppy_django.verifier.
dpop` turns it into the :class:`~poppy_django.verifier.principal.AuthRefusal` answered.
"""

from __future__ import annotations

import hmac
import math
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, TypeGuard

import jwt

#: The description of each refusal (``invalid_token`` adds which claim failed and why).
DESCRIPTIONS = {
    "invalid_token": "The access token is missing, malformed, expired or not for this resource.",
    "invalid_dpop_proof": "The DPoP proof is missing or not valid for this request.",
    "use_dpop_nonce": "Sign the DPoP proof with the nonce in the DPoP-Nonce header.",
    "sign_in_required": "The User must sign in for this request.",
    "insufficient_scope": "The token lacks a scope this request requires.",
}
#: Claim values longer than these are refused rather than stored.
MAX_ID_LENGTH = 512
MAX_JTI_LENGTH = 256
#: Claim values quoted in a refusal are cut to this length.
MAX_QUOTED = 200


class Refused(Exception):
    """A failed check. ``reason`` is logged; for invalid_token it is also told, and
    so it is when ``told`` (a reason naming only public facts that tell the fix)."""

    def __init__(
        self, code: str, reason: str, *, scope: str | None = None, told: bool = False
    ) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason
        self.scope = scope
        self.told = told


def number(value: Any) -> TypeGuard[int | float]:
    """A JSON number that is finite (not a bool, not NaN or Infinity). An integer is always
    finite (``math.isfinite`` would overflow on one past a float's range)."""
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and math.isfinite(value))


def all_finite(value: Any) -> bool:
    """No NaN or Infinity anywhere in a decoded JSON value (iterative: depth is the caller's)."""
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return False
        if isinstance(item, dict):
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return True


def same(value: Any, expected: str) -> bool:
    """Constant-time equality of an untrusted claim and an ASCII value (no TypeError on
    non-ASCII text, which ``hmac.compare_digest`` raises for ``str``)."""
    return isinstance(value, str) and value.isascii() and hmac.compare_digest(value, expected)


def quoted(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= MAX_QUOTED else text[: MAX_QUOTED - 3] + "..."


def when(timestamp: float) -> str:
    """A time for a refusal's description; one past any calendar as seconds since the epoch."""
    try:
        return datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (ValueError, OverflowError, OSError):
        return f"{quoted(timestamp)} s after the epoch"


def claim(claims: Mapping[str, Any], dotted: str) -> Any:
    value: Any = claims
    for name in dotted.split("."):
        if not isinstance(value, Mapping):
            return None
        value = value.get(name)
    return value


def string(value: Any, code: str, what: str, *, max_length: int = MAX_ID_LENGTH) -> str:
    if not isinstance(value, str) or not value or len(value) > max_length:
        raise Refused(code, f"{what}: missing, empty, too long or not a string")
    return value


def compact(jws: str, code: str, what: str) -> None:
    """Refuse what is not one compact JWS before pyjwt sees it (two proofs in one header)."""
    if jws.count(".") != 2 or not jws.isascii():
        raise Refused(code, f"{what}: not one compact JWS")


def jws_header(jws: str, code: str, what: str) -> dict[str, Any]:
    """The unverified JOSE header of one compact JWS (pyjwt parses it)."""
    compact(jws, code, what)
    try:
        return jwt.get_unverified_header(jws)
    except (jwt.InvalidTokenError, RecursionError) as exc:
        reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise Refused(code, f"{what}: malformed header ({reason})") from None
