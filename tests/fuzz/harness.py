"""The running endpoint under fuzzing: a real uvicorn server, credentials, and the checks
every answer must pass.

Every case is one HTTP request. Its answer must not be a 5xx; every error must be a JSON
object with ``error``; and a request that is refused, or that only reads, must leave the
database as it was (conversations, events and message receipts counted before and after).
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import os
import secrets
import time
from dataclasses import dataclass
from typing import Any

import httpx
import jwt
from cryptography.hazmat.primitives.asymmetric import ec
from hypothesis import HealthCheck, settings

from poppy_django.authority import development, keys
from poppy_django.client import DPoPKey
from poppy_django.models import Conversation, Event, MessageReceipt
from poppy_django.verifier import local_issuer
from tests.agents import PersonalAgent
from tests.fuzz.strategies import Credentials

ENDPOINT_PATH = "/poppy/conversations"

settings.register_profile(
    "bounded",
    max_examples=int(os.environ.get("POPPY_FUZZ_EXAMPLES", "30")),
    # The same cases every run: `make test` guards against regressions, and new inputs are
    # the long run's job (random), whose finds become tests of their own.
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)
settings.register_profile(
    "long",
    max_examples=int(os.environ.get("POPPY_FUZZ_EXAMPLES", "3000")),
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)
PROFILE = os.environ.get("POPPY_FUZZ_PROFILE", "bounded")


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def credential_headers(
    agent: PersonalAgent, method: str, url: str, how: Credentials
) -> list[tuple[bytes, bytes]]:
    """The credentials ``how`` describes, for one request of ``agent`` (which holds a Session
    Token and its DPoP key: :meth:`PersonalAgent.with_session_token`)."""
    key, token_text = agent.dpop_key, agent.token
    assert key is not None and token_text is not None, "a Session Token agent"
    dpop = lambda: key.proof(method, url, access_token=token_text).encode()  # noqa: E731
    token = token_text.encode()
    if how.kind == "valid":
        return [(b"authorization", b"DPoP " + token), (b"dpop", dpop())]
    if how.kind == "none":
        return []
    if how.kind == "bearer":
        return [(b"authorization", b"Bearer " + token)]
    if how.kind == "two_proofs":
        return [(b"authorization", b"DPoP " + token), (b"dpop", dpop()), (b"dpop", dpop())]
    if how.kind == "garbage_token":
        return [(b"authorization", b"DPoP " + _header_safe(how.garbage)), (b"dpop", dpop())]
    if how.kind == "garbage_proof":
        return [(b"authorization", b"DPoP " + token), (b"dpop", _header_safe(how.garbage))]
    if how.kind == "forged_proof":
        return [
            (b"authorization", b"DPoP " + token),
            (b"dpop", _forged_proof(key, token_text, method, url, how)),
        ]
    if how.kind == "forged_token":
        forged = _token(key, how.token_claims, how.token_header, keys.signing_key())
        return [
            (b"authorization", b"DPoP " + forged),
            (b"dpop", _proof_for(key, method, url, forged)),
        ]
    if how.kind == "other_issuer_key":
        other = ec.generate_private_key(ec.SECP256R1())
        forged = _token(key, {}, how.token_header, other)
        return [
            (b"authorization", b"DPoP " + forged),
            (b"dpop", _proof_for(key, method, url, forged)),
        ]
    raise AssertionError(how.kind)


def _proof_for(key: DPoPKey, method: str, url: str, token: bytes) -> bytes:
    claims = {
        "jti": secrets.token_urlsafe(16),
        "htm": method,
        "htu": url.split("?")[0],
        "iat": int(time.time()),
        "ath": b64url(hashlib.sha256(token).digest()),
    }
    return jwt.encode(
        claims,
        key.private_key,
        algorithm="ES256",
        headers={"typ": "dpop+jwt", "jwk": key.public_jwk},
    ).encode()


def _forged_proof(key: DPoPKey, token: str, method: str, url: str, how: Credentials) -> bytes:
    claims: dict[str, Any] = {
        "jti": secrets.token_urlsafe(16),
        "htm": method,
        "htu": url.split("?")[0],
        "iat": int(time.time()),
        "ath": b64url(hashlib.sha256(token.encode()).digest()),
        **how.proof_claims,
    }
    for name in how.drop:
        claims.pop(name, None)
    headers = {"typ": "dpop+jwt", "jwk": key.public_jwk, **how.proof_header}
    return _signed(claims, headers, key.private_key)


def _token(key: DPoPKey, claims: dict[str, Any], header: dict[str, Any], signer: Any) -> bytes:
    now = int(time.time())
    payload = {
        "iss": local_issuer.token_issuer(),
        "aud": development.default_audience(),
        "iat": now,
        "nbf": now,
        "exp": now + 600,
        "sub": "fuzz-user",
        "client_id": development.DEFAULT_CLIENT_ID,
        "sid": "ses-fuzz",
        "cnf": {"jkt": key.thumbprint},
        **claims,
    }
    headers = {"kid": keys.public_jwks()["keys"][0]["kid"], **header}
    return _signed(payload, headers, signer)


def _signed(claims: dict[str, Any], headers: dict[str, Any], key: Any) -> bytes:
    """A compact JWS signed ES256 whatever its header claims (a forged ``alg`` included)."""
    header = {"alg": "ES256", **headers}
    signing_input = (
        b64url(json.dumps(header, allow_nan=True).encode())
        + "."
        + b64url(json.dumps(claims, allow_nan=True).encode())
    )
    signature = jwt.algorithms.ECAlgorithm(jwt.algorithms.ECAlgorithm.SHA256).sign(
        signing_input.encode(), key
    )
    return (signing_input + "." + b64url(signature)).encode()


def _header_safe(value: bytes) -> bytes:
    """What HTTP/1.1 can carry in a header value (no control characters)."""
    return bytes(b for b in value if b > 0x20 and b != 0x7F) or b"x"


def rows() -> tuple[int, int, int]:
    return (Conversation.objects.count(), Event.objects.count(), MessageReceipt.objects.count())


@dataclass
class Answer:
    method: str
    status: int
    content_type: str
    body: bytes


def send(
    client: httpx.Client,
    method: str,
    url: str,
    headers: list[tuple[bytes, bytes]],
    body: bytes | None,
) -> Answer:
    """One request; a stream's first bytes only (a stream that opens is not read to its end)."""
    with client.stream(method, url, headers=headers, content=body) as response:
        content_type = response.headers.get("content-type", "")
        if content_type.startswith("text/event-stream"):
            return Answer(method, response.status_code, content_type, b"")
        return Answer(method, response.status_code, content_type, response.read())


#: Credentials no verifier may accept, whatever else the request holds.
NEVER_ACCEPTED = frozenset(
    {"none", "bearer", "two_proofs", "garbage_token", "garbage_proof", "other_issuer_key"}
)


def must_refuse(how: Credentials) -> bool:
    """Whether these credentials are forged past acceptance: the kinds above, a proof whose
    ``iat`` is not a number near now, or a token whose ``exp`` is not a number ahead."""
    if how.kind in NEVER_ACCEPTED:
        return True
    now = time.time()
    if how.kind == "forged_proof" and "iat" in how.proof_claims:
        iat = how.proof_claims["iat"]
        return not (_number(iat) and now - 60 < iat < now + 60)  # no subtraction: iat may be huge
    if how.kind == "forged_token" and "exp" in how.token_claims:
        exp = how.token_claims["exp"]
        return not (_number(exp) and exp > now)
    return False


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def check(answer: Answer, before: tuple[int, int, int], writes: bool, how: Credentials) -> None:
    """The invariants of every answer of the endpoint."""
    assert answer.status < 500, f"{answer.status}: {answer.body[:500]!r}"
    if must_refuse(how):
        assert answer.status >= 400 or answer.status == 405, f"forged credentials accepted: {how}"
    if answer.status >= 400:
        assert answer.content_type.startswith("application/json"), answer.content_type
    if answer.method == "HEAD" or answer.content_type.startswith("text/event-stream"):
        pass  # no body to read (HEAD), or a stream that opened
    elif answer.status >= 400:
        body = json.loads(answer.body)
        assert isinstance(body, dict) and isinstance(body.get("error"), str), body
    else:
        json.loads(answer.body)
    if answer.status >= 400 or not writes:
        assert rows() == before, f"a refused or read-only request wrote rows: {answer}"
