"""Hostile input to the DPoP verifier over HTTP (issue 12): each case failed on 0.1's verifier.

- forged ``kid`` values do not grow the process (the key source remembered every miss);
- ``NaN`` / ``Infinity`` in any numeric claim of a proof or a token are refused (every
  comparison with NaN is false, so a NaN ``iat`` skipped the proof's freshness check);
- non-ASCII ``ath`` / ``jti`` / ``cnf.jkt`` and deeply nested headers are refusals, never a
  500 or a logged traceback;
- a verified token's claims are reused, but its expiry, the proof and the replay cache are
  still checked on every request.
"""

from __future__ import annotations

import gc
import logging
import secrets
import tracemalloc
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import Client

from poppy_django.client import DPoPKey
from poppy_django.verifier import dpop
from poppy_django.verifier.jwk import b64url
from tests.auth.conftest import dpop_poppy
from tests.auth.support import ENDPOINT_URL, NOW, Issuer, proof
from tests.auth.test_http import assert_refused, post, rows

pytestmark = pytest.mark.django_db
writes = pytest.mark.django_db


class Clock:
    """The configured verifier's clock, moved by the test."""

    def __init__(self) -> None:
        self.now = float(NOW)

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(settings: Any, issuer: Issuer) -> Iterator[Clock]:
    dpop_poppy(settings, issuer)
    dpop.reset()
    clock = Clock()
    dpop.get_verifier().clock = clock
    yield clock
    dpop.reset()


@pytest.fixture
def no_error_logs(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    caplog.set_level(logging.INFO)
    yield
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []


def test_forged_kids_do_not_grow_the_process(clock: Clock, issuer: Issuer) -> None:
    """400 requests with random 5 KB kids and no credentials: memory comes back."""
    pa_key = DPoPKey()
    forged = []
    for _ in range(400):
        token = issuer.sign(
            issuer.claims(jkt=pa_key.thumbprint, now=NOW),
            headers={"kid": secrets.token_urlsafe(3800)},
        )
        forged.append((token, proof(pa_key, "POST", ENDPOINT_URL, token, now=NOW)))
    post(*forged[0])  # warm up: imports, first-use caches
    gc.collect()
    logging.disable(logging.CRITICAL)  # pytest keeps every log record of a test
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for token, signed in forged:
            assert post(token, signed).status_code == 401
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
        logging.disable(logging.NOTSET)
    # 400 remembered kids would hold over 2 MB.
    assert grown < 500_000, grown


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
@pytest.mark.parametrize("claim", ["iat", "nested"])
def test_non_finite_numbers_in_a_proof_are_refused(
    clock: Clock, issuer: Issuer, value: float, claim: str
) -> None:
    pa_key = DPoPKey()
    token = issuer.token(jkt=pa_key.thumbprint, now=NOW)
    extra = {"iat": value} if claim == "iat" else {"ext": {"n": [1, value]}}
    signed = proof(pa_key, "POST", ENDPOINT_URL, token, now=NOW, **extra)
    before = rows()
    assert_refused(post(token, signed), 401, "invalid_dpop_proof")
    # A replay entry expiring must not make it acceptable again: still refused later.
    clock.now += 3600
    assert_refused(post(token, signed), 401, "invalid_dpop_proof")
    assert rows() == before


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
@pytest.mark.parametrize("claim", ["exp", "nbf", "iat", "custom"])
def test_non_finite_numbers_in_a_token_are_refused(
    clock: Clock, issuer: Issuer, value: float, claim: str
) -> None:
    pa_key = DPoPKey()
    claims = issuer.claims(jkt=pa_key.thumbprint, now=NOW)
    if claim == "custom":
        claims["x"] = {"y": value}
    else:
        claims[claim] = value
    token = issuer.sign(claims)
    response = post(token, proof(pa_key, "POST", ENDPOINT_URL, token, now=NOW))
    assert_refused(response, 401, "invalid_token")
    assert "finite" in response.json()["error_description"] or claim == "custom"


@pytest.mark.parametrize(
    ("claim", "value"),
    [("exp", -(10**12)), ("exp", -(10**18)), ("nbf", 10**12), ("iat", 10**18), ("iat", 10**400)],
)
def test_times_past_any_calendar_are_refused_not_a_500(
    clock: Clock, issuer: Issuer, no_error_logs: None, claim: str, value: int
) -> None:
    """A signed time no calendar holds (the fuzzing's find): the refusal still names it."""
    pa_key = DPoPKey()
    claims = issuer.claims(jkt=pa_key.thumbprint, now=NOW)
    claims[claim] = value
    token = issuer.sign(claims)
    response = post(token, proof(pa_key, "POST", ENDPOINT_URL, token, now=NOW))
    assert_refused(response, 401, "invalid_token")
    assert response.json()["error_description"].startswith(f"{claim}:")


@pytest.mark.parametrize("ath", ["\u00e9" * 43, "\ud800", "x\u0000y", "\u2603"])
def test_non_ascii_ath_is_a_proof_refusal(
    clock: Clock, issuer: Issuer, no_error_logs: None, ath: str
) -> None:
    pa_key = DPoPKey()
    token = issuer.token(jkt=pa_key.thumbprint, now=NOW)
    assert_refused(
        post(token, proof(pa_key, "POST", ENDPOINT_URL, token, now=NOW, ath=ath)),
        401,
        "invalid_dpop_proof",
    )
    # Before the token is even checked: a garbage token with the same proof is refused too.
    signed = proof(pa_key, "POST", ENDPOINT_URL, "a.b.c", now=NOW, ath=ath)
    assert post("a.b.c", signed).status_code == 401


def test_non_ascii_jkt_is_a_proof_refusal(
    clock: Clock, issuer: Issuer, no_error_logs: None
) -> None:
    pa_key = DPoPKey()
    token = issuer.sign({**issuer.claims(jkt="x", now=NOW), "cnf": {"jkt": "\u00e9\ud800"}})
    assert_refused(
        post(token, proof(pa_key, "POST", ENDPOINT_URL, token, now=NOW)), 401, "invalid_dpop_proof"
    )


@writes
def test_non_ascii_jti_is_accepted_once(clock: Clock, issuer: Issuer, no_error_logs: None) -> None:
    pa_key = DPoPKey()
    token = issuer.token(jkt=pa_key.thumbprint, now=NOW)
    signed = proof(pa_key, "POST", ENDPOINT_URL, token, now=NOW, jti="\u00e9\ud800")
    assert post(token, signed).status_code == 201
    assert_refused(post(token, signed), 401, "invalid_dpop_proof")


def test_deeply_nested_headers_are_refused(
    clock: Clock, issuer: Issuer, no_error_logs: None
) -> None:
    pa_key = DPoPKey()
    token = issuer.token(jkt=pa_key.thumbprint, now=NOW)
    deep = b64url(b"[" * 3000 + b"]" * 3000)
    assert_refused(post(token, f"{deep}.e30.e30"), 401, "invalid_dpop_proof")
    deep_token = f"{deep}.e30.e30"
    assert_refused(
        post(deep_token, proof(pa_key, "POST", ENDPOINT_URL, deep_token, now=NOW)),
        401,
        "invalid_token",
    )


# -- the verified-token cache -----------------------------------------------------------


@writes
def test_a_cached_token_still_needs_a_fresh_proof_and_expires(clock: Clock, issuer: Issuer) -> None:
    pa_key = DPoPKey()
    token = issuer.token(jkt=pa_key.thumbprint, now=NOW, ttl=120)
    signed = proof(pa_key, "POST", ENDPOINT_URL, token, now=NOW)
    assert post(token, signed).status_code == 201
    assert len(dpop.get_verifier().verified) == 1
    # The token is remembered; the proof is not: a replay, another key, a stale proof fail.
    assert_refused(post(token, signed), 401, "invalid_dpop_proof")
    other = DPoPKey()
    assert_refused(
        post(token, proof(other, "POST", ENDPOINT_URL, token, now=NOW)), 401, "invalid_dpop_proof"
    )
    clock.now = NOW + 100
    assert_refused(
        post(token, proof(pa_key, "POST", ENDPOINT_URL, token, now=NOW)), 401, "invalid_dpop_proof"
    )
    # Past exp + leeway the remembered token is refused, naming exp.
    clock.now = NOW + 151
    response = post(token, proof(pa_key, "POST", ENDPOINT_URL, token, now=clock.now))
    assert_refused(response, 401, "invalid_token")
    assert response.json()["error_description"].startswith("exp: expired")


def test_the_cache_is_bounded(settings: Any, issuer: Issuer) -> None:
    dpop_poppy(settings, issuer, VERIFIED_TOKEN_CACHE_SIZE=3)
    dpop.reset()
    verifier = dpop.get_verifier()
    verifier.clock = lambda: NOW
    for n in range(6):
        key = DPoPKey()
        token = issuer.token(jkt=key.thumbprint, now=NOW, sub=f"u{n}")
        headers = {
            "HTTP_AUTHORIZATION": f"DPoP {token}",
            "HTTP_DPOP": proof(key, "GET", ENDPOINT_URL + "/cnv_x/events", token, now=NOW),
        }
        Client().get("/poppy/conversations/cnv_x/events", **headers)
    assert len(verifier.verified) == 3
    dpop.reset()


def test_refused_tokens_are_not_cached(clock: Clock, issuer: Issuer) -> None:
    pa_key = DPoPKey()
    for aud in ("https://api.example/other", ENDPOINT_URL):
        token = issuer.token(jkt=pa_key.thumbprint, now=NOW, aud=aud, iss="https://evil.example")
        post(token, proof(pa_key, "POST", ENDPOINT_URL, token, now=NOW))
    assert len(dpop.get_verifier().verified) == 0
