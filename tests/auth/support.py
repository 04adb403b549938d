"""Helpers for the auth tests: an issuer with its keys, tokens and (broken) DPoP proofs."""

from __future__ import annotations

import secrets
import time
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

from poppy_django.client import DPoPKey
from poppy_django.verifier.jwk import public_jwk

ISSUER = "https://issuer.example"
BASE_URL = "https://api.example"
ENDPOINT_URL = BASE_URL + "/poppy/conversations"
CLIENT_ID = "https://pa.example/client"
#: A fixed instant for the verifier's clock in direct tests.
NOW = 1_800_000_000


def private_key(alg: str) -> Any:
    if alg == "ES256":
        return ec.generate_private_key(ec.SECP256R1())
    if alg == "RS256":
        return rsa.generate_private_key(public_exponent=65537, key_size=2048)
    if alg == "EdDSA":
        return ed25519.Ed25519PrivateKey.generate()
    raise ValueError(alg)


class Issuer:
    """A Poppy issuer: signing keys (by kid) and Session Tokens."""

    def __init__(self, kid: str = "k1", alg: str = "ES256") -> None:
        self.keys: dict[str, tuple[str, Any]] = {}
        self.add_key(kid, alg)
        self.kid = kid

    def add_key(self, kid: str, alg: str = "ES256") -> None:
        self.keys[kid] = (alg, private_key(alg))

    @property
    def jwks(self) -> dict[str, Any]:
        return {
            "keys": [
                {**public_jwk(key.public_key()), "kid": kid, "alg": alg, "use": "sig"}
                for kid, (alg, key) in self.keys.items()
            ]
        }

    def claims(
        self,
        *,
        jkt: str,
        now: float,
        sub: str = "user-1",
        account: str | None = None,
        scope: str | None = None,
        aud: Any = ENDPOINT_URL,
        iss: str = ISSUER,
        ttl: int = 600,
        **extra: Any,
    ) -> dict[str, Any]:
        claims: dict[str, Any] = {
            "iss": iss,
            "aud": aud,
            "sub": sub,
            "client_id": CLIENT_ID,
            "sid": "ses-1",
            "iat": int(now),
            "exp": int(now) + ttl,
            "cnf": {"jkt": jkt},
        }
        if account is not None:
            claims["acct"] = account
        if scope is not None:
            claims["scope"] = scope
        claims.update(extra)
        return claims

    def sign(self, claims: dict[str, Any], *, kid: str | None = None, headers: Any = None) -> str:
        kid = kid or self.kid
        alg, key = self.keys[kid]
        return jwt.encode(claims, key, algorithm=alg, headers={"kid": kid, **(headers or {})})

    def token(self, *, jkt: str, now: float, kid: str | None = None, **claims: Any) -> str:
        return self.sign(self.claims(jkt=jkt, now=now, **claims), kid=kid)


def proof(
    key: DPoPKey,
    method: str,
    url: str,
    token: str | None,
    *,
    now: float,
    header: dict[str, Any] | None = None,
    signing_key: Any = None,
    alg: str = "ES256",
    drop: tuple[str, ...] = (),
    **claims: Any,
) -> str:
    """A DPoP proof; every part can be overridden or dropped to forge a broken one."""
    import hashlib

    from poppy_django.verifier.jwk import b64url

    body: dict[str, Any] = {
        "jti": secrets.token_urlsafe(16),
        "htm": method,
        "htu": url.split("?")[0],
        "iat": int(now),
    }
    if token is not None:
        body["ath"] = b64url(hashlib.sha256(token.encode()).digest())
    body.update(claims)
    for name in drop:
        body.pop(name, None)
    headers = {"typ": "dpop+jwt", "jwk": key.public_jwk, **(header or {})}
    return jwt.encode(body, signing_key or key.private_key, algorithm=alg, headers=headers)


def request_info(
    method: str, url: str, token: str | None, dpop: str | None, scheme: str = "DPoP"
) -> dict[str, Any]:
    headers: dict[str, str] = {}
    if token is not None:
        headers["authorization"] = f"{scheme} {token}"
    if dpop is not None:
        headers["dpop"] = dpop
    return {"method": method, "url": url, "headers": headers}


def wall_now() -> float:
    return time.time()
