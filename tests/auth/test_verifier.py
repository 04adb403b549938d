"""The default verifier, called directly: the forged and broken request catalogue (issue 3 §5).

Every case is refused with its code and the one fixed description of that code; removing any
single check of the verifier makes at least one case here pass where it must fail.
The verifier's clock is fixed (``NOW``): nothing here depends on the wall clock.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from poppy_django.client import DPoPKey
from poppy_django.verifier import AuthRefusal, dpop, nonces
from poppy_django.verifier.jwk import b64url, public_jwk, thumbprint
from poppy_django.verifier.proof import normalize_htu
from tests.auth.conftest import dpop_poppy
from tests.auth.support import CLIENT_ID, ENDPOINT_URL, NOW, Issuer, proof, request_info

pytestmark = pytest.mark.usefixtures("dpop_settings")

URL = ENDPOINT_URL
MSG_URL = ENDPOINT_URL + "/cnv_1/messages"


def verifier() -> dpop.DPoPVerifier:
    return dpop.build_verifier(clock=lambda: NOW)


def refused(info: dict[str, Any], verify: Callable[[Any], Any] | None = None) -> AuthRefusal:
    with pytest.raises(AuthRefusal) as caught:
        (verify or verifier())(info)
    refusal = caught.value
    assert_description(refusal.error, refusal.description, info)
    assert refusal.www_authenticate.startswith(f'DPoP error="{refusal.error}"')
    assert f'algs="{" ".join(dpop.get_verifier().options.dpop_algorithms)}"' in (
        refusal.www_authenticate
    )
    return refusal


def assert_description(error: str, description: str | None, info: dict[str, Any]) -> None:
    """The fixed description, except invalid_token's (which claim failed, no credential in
    it) and a proof for another URL's (the URL this server expected: a wrong BASE_URL)."""
    if description and description.startswith("htu does not match the URL: "):
        assert f"this server expected {normalize_htu(info['url'])} " in description
        return
    if error != "invalid_token":
        assert description == dpop.DESCRIPTIONS[error]
        return
    assert description and description != dpop.DESCRIPTIONS[error]
    for credential in (info["headers"].get("authorization"), info["headers"].get("dpop")):
        for part in (credential or "").replace("DPoP ", "").split("."):
            assert len(part) < 16 or part not in description


def tamper(jws: str, part: int, change: Callable[[dict[str, Any]], None]) -> str:
    segments = jws.split(".")
    value = json.loads(base64.urlsafe_b64decode(segments[part] + "=="))
    change(value)
    segments[part] = b64url(json.dumps(value).encode())
    return ".".join(segments)


# -- accepted ----------------------------------------------------------------------------


def test_signed_out_token_and_proof_are_accepted(issuer: Issuer, pa_key: DPoPKey) -> None:
    token = issuer.token(jkt=pa_key.thumbprint, now=NOW, scope="poppy:read")
    principal = verifier()(
        request_info("POST", URL, token, proof(pa_key, "POST", URL, token, now=NOW))
    )
    assert principal.client_id == CLIENT_ID
    assert principal.user_id == "user-1"
    assert principal.signed_in is False and principal.account_id is None
    assert principal.session_id == "ses-1"
    assert principal.scopes == {"poppy:read"}
    assert principal.resource == ENDPOINT_URL
    assert principal.token_type == "DPoP"


def test_signed_in_token(issuer: Issuer, pa_key: DPoPKey) -> None:
    token = issuer.token(
        jkt=pa_key.thumbprint, now=NOW, account="acct-1", scope="poppy:read poppy:write"
    )
    principal = verifier()(
        request_info("GET", MSG_URL, token, proof(pa_key, "GET", MSG_URL, token, now=NOW))
    )
    assert principal.signed_in and principal.account_id == "acct-1"
    assert principal.scopes == {"poppy:read", "poppy:write"}


def test_signed_in_flag_false_ignores_the_account(issuer: Issuer, pa_key: DPoPKey) -> None:
    token = issuer.token(jkt=pa_key.thumbprint, now=NOW, account="acct-1", signed_in=False)
    principal = verifier()(
        request_info("POST", URL, token, proof(pa_key, "POST", URL, token, now=NOW))
    )
    assert not principal.signed_in and principal.account_id is None


@pytest.mark.parametrize("alg", ["ES256", "RS256", "EdDSA"])
def test_each_token_algorithm(settings: Any, pa_key: DPoPKey, alg: str) -> None:
    issuer = Issuer(alg=alg)
    dpop_poppy(settings, issuer)
    token = issuer.token(jkt=pa_key.thumbprint, now=NOW)
    assert verifier()(request_info("POST", URL, token, proof(pa_key, "POST", URL, token, now=NOW)))


@pytest.mark.parametrize("alg", ["RS256", "EdDSA"])
def test_each_proof_algorithm(issuer: Issuer, alg: str) -> None:
    from tests.auth.support import private_key

    key = private_key(alg)
    jwk = public_jwk(key.public_key())
    token = issuer.token(jkt=thumbprint(jwk), now=NOW)
    pa = DPoPKey()
    signed = proof(pa, "POST", URL, token, now=NOW, header={"jwk": jwk}, signing_key=key, alg=alg)
    assert verifier()(request_info("POST", URL, token, signed)).user_id == "user-1"


def test_htu_is_compared_normalized_and_without_query(issuer: Issuer, pa_key: DPoPKey) -> None:
    token = issuer.token(jkt=pa_key.thumbprint, now=NOW)
    url = URL + "/cnv_1/events?wait=30"
    signed = proof(
        pa_key,
        "GET",
        URL + "/cnv_1/events",
        token,
        now=NOW,
        htu="HTTPS://API.example:443/poppy/conversations/cnv_1/events",
    )
    assert verifier()(request_info("GET", url, token, signed))


def test_audience_list_and_custom_claim_names(
    settings: Any, issuer: Issuer, pa_key: DPoPKey
) -> None:
    dpop_poppy(settings, issuer, CLAIMS={"user_id": "pairwise_sub", "account_id": "account"})
    claims = issuer.claims(jkt=pa_key.thumbprint, now=NOW, aud=["other", ENDPOINT_URL])
    claims["pairwise_sub"] = claims.pop("sub")
    claims["account"] = "acct-9"
    token = issuer.sign(claims)
    principal = verifier()(
        request_info("POST", URL, token, proof(pa_key, "POST", URL, token, now=NOW))
    )
    assert principal.user_id == "user-1" and principal.account_id == "acct-9"


def test_leeway_accepts_slightly_early_and_late(issuer: Issuer, pa_key: DPoPKey) -> None:
    # Issued 20 s ahead, expired 10 s ago, proof 25 s ahead: all within the 30 s leeway.
    token = issuer.token(jkt=pa_key.thumbprint, now=NOW + 20, ttl=-30)
    signed = proof(pa_key, "POST", URL, token, now=NOW + 25)
    assert verifier()(request_info("POST", URL, token, signed))


# -- the catalogue -------------------------------------------------------------------------


def _hmac_with_public_key(pa_key: DPoPKey, token: str) -> str:
    pem = pa_key.private_key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    body = {
        "jti": "x1",
        "htm": "POST",
        "htu": URL,
        "iat": NOW,
        "ath": b64url(hashlib.sha256(token.encode()).digest()),
    }
    header = {"typ": "dpop+jwt", "jwk": pa_key.public_jwk, "alg": "HS256"}
    signing_input = b64url(json.dumps(header).encode()) + "." + b64url(json.dumps(body).encode())
    import hmac as hmac_module

    sig = hmac_module.new(pem, signing_input.encode(), hashlib.sha256).digest()
    return signing_input + "." + b64url(sig)


def _unsigned(header: dict[str, Any], body: dict[str, Any]) -> str:
    return b64url(json.dumps(header).encode()) + "." + b64url(json.dumps(body).encode()) + ".e30"


def _private_jwk(pa_key: DPoPKey) -> dict[str, Any]:
    numbers = pa_key.private_key.private_numbers()
    return {**pa_key.public_jwk, "d": b64url(numbers.private_value.to_bytes(32, "big"))}


PROOF_CASES: dict[str, Callable[[Issuer, DPoPKey, str], tuple[str, str]]] = {
    # (token, proof) for POST URL, each expected invalid_dpop_proof.
    "no proof": lambda i, k, t: (t, ""),
    "alg none": lambda i, k, t: (
        t,
        _unsigned(
            {"typ": "dpop+jwt", "alg": "none", "jwk": k.public_jwk},
            {"jti": "n1", "htm": "POST", "htu": URL, "iat": NOW},
        ),
    ),
    "hmac with the public key": lambda i, k, t: (t, _hmac_with_public_key(k, t)),
    "private key in jwk": lambda i, k, t: (
        t,
        proof(k, "POST", URL, t, now=NOW, header={"jwk": _private_jwk(k)}),
    ),
    "no jwk": lambda i, k, t: (
        t,
        jwt.encode(
            {"jti": "a", "htm": "POST", "htu": URL, "iat": NOW},
            k.private_key,
            algorithm="ES256",
            headers={"typ": "dpop+jwt"},
        ),
    ),
    "jwk of another curve": lambda i, k, t: (
        t,
        proof(
            k,
            "POST",
            URL,
            t,
            now=NOW,
            header={"jwk": public_jwk(ec.generate_private_key(ec.SECP384R1()).public_key())},
        ),
    ),
    "short rsa key": lambda i, k, t: (
        t,
        proof(
            k,
            "POST",
            URL,
            t,
            now=NOW,
            alg="RS256",
            signing_key=(small := rsa.generate_private_key(public_exponent=65537, key_size=1024)),
            header={"jwk": public_jwk(small.public_key())},
        ),
    ),
    "typ JWT": lambda i, k, t: (t, proof(k, "POST", URL, t, now=NOW, header={"typ": "JWT"})),
    "no typ": lambda i, k, t: (t, proof(k, "POST", URL, t, now=NOW, header={"typ": None})),
    "signature of another key": lambda i, k, t: (
        t,
        proof(k, "POST", URL, t, now=NOW, signing_key=ec.generate_private_key(ec.SECP256R1())),
    ),
    "wrong htm": lambda i, k, t: (t, proof(k, "GET", URL, t, now=NOW)),
    "lower-case htm": lambda i, k, t: (t, proof(k, "post", URL, t, now=NOW)),
    "wrong htu path": lambda i, k, t: (t, proof(k, "POST", URL + "/cnv_1/close", t, now=NOW)),
    "wrong htu host": lambda i, k, t: (
        t,
        proof(k, "POST", "https://evil.example/poppy/conversations", t, now=NOW),
    ),
    "wrong htu scheme": lambda i, k, t: (
        t,
        proof(k, "POST", "http://api.example/poppy/conversations", t, now=NOW),
    ),
    "htu not a url": lambda i, k, t: (t, proof(k, "POST", URL, t, now=NOW, htu="nonsense")),
    "no htu": lambda i, k, t: (t, proof(k, "POST", URL, t, now=NOW, drop=("htu",))),
    "stale iat": lambda i, k, t: (t, proof(k, "POST", URL, t, now=NOW - 91)),
    "future iat": lambda i, k, t: (t, proof(k, "POST", URL, t, now=NOW + 31)),
    "no iat": lambda i, k, t: (t, proof(k, "POST", URL, t, now=NOW, drop=("iat",))),
    "string iat": lambda i, k, t: (t, proof(k, "POST", URL, t, now=NOW, iat=str(NOW))),
    "no jti": lambda i, k, t: (t, proof(k, "POST", URL, t, now=NOW, drop=("jti",))),
    "huge jti": lambda i, k, t: (t, proof(k, "POST", URL, t, now=NOW, jti="j" * 300)),
    "ath of another token": lambda i, k, t: (
        t,
        proof(k, "POST", URL, i.token(jkt=k.thumbprint, now=NOW, sub="u2"), now=NOW),
    ),
    "no ath": lambda i, k, t: (t, proof(k, "POST", URL, t, now=NOW, drop=("ath",))),
    "proof key is not the token's": lambda i, k, t: (t, proof(DPoPKey(), "POST", URL, t, now=NOW)),
    "tampered proof payload": lambda i, k, t: (
        t,
        tamper(proof(k, "POST", URL, t, now=NOW), 1, lambda c: c.update(htm="POST", jti="other")),
    ),
    "tampered proof header": lambda i, k, t: (
        t,
        tamper(proof(k, "POST", URL, t, now=NOW), 0, lambda h: h.update(kid="x")),
    ),
    "malformed base64 proof": lambda i, k, t: (t, "e30!.e30.e30"),
    "malformed json proof": lambda i, k, t: (t, b64url(b"{not json") + ".e30.e30"),
    "proof header not an object": lambda i, k, t: (t, b64url(b"[1]") + ".e30.e30"),
    "two proofs": lambda i, k, t: (
        t,
        proof(k, "POST", URL, t, now=NOW) + ", " + proof(k, "POST", URL, t, now=NOW),
    ),
    "oversized proof": lambda i, k, t: (t, proof(k, "POST", URL, t, now=NOW, pad="x" * 9000)),
    "critical extension": lambda i, k, t: (
        t,
        proof(k, "POST", URL, t, now=NOW, header={"crit": ["exp"]}),
    ),
    "the token as proof": lambda i, k, t: (t, t),
}


@pytest.mark.filterwarnings("ignore:The RSA key is 1024 bits")
@pytest.mark.parametrize("case", sorted(PROOF_CASES))
def test_broken_proof_is_refused(case: str, issuer: Issuer, pa_key: DPoPKey) -> None:
    token = issuer.token(jkt=pa_key.thumbprint, now=NOW)
    token, signed = PROOF_CASES[case](issuer, pa_key, token)
    refusal = refused(request_info("POST", URL, token, signed or None))
    assert (refusal.error, refusal.status) == ("invalid_dpop_proof", 401)
    assert "DPoP-Nonce" not in refusal.headers


@pytest.mark.filterwarnings("ignore:The RSA key is 1024 bits")
@pytest.mark.parametrize("case", sorted(PROOF_CASES))
def test_broken_proof_is_refused_after_the_keys_header_was_remembered(
    case: str, issuer: Issuer, pa_key: DPoPKey
) -> None:
    """A remembered header skips only the header checks: the signature and every claim of
    a proof with that same header are still checked."""
    token = issuer.token(jkt=pa_key.thumbprint, now=NOW)
    verify = verifier()
    good = proof(pa_key, "POST", URL, token, now=NOW)
    assert verify(request_info("POST", URL, token, good))
    assert len(verify.proof_keys) == 1
    token, signed = PROOF_CASES[case](issuer, pa_key, token)
    refusal = refused(request_info("POST", URL, token, signed or None), verify)
    assert (refusal.error, refusal.status) == ("invalid_dpop_proof", 401)


def test_a_remembered_header_is_the_byte_identical_one(issuer: Issuer, pa_key: DPoPKey) -> None:
    """The broken cases above do reuse the remembered header (the cache is exercised)."""
    token = issuer.token(jkt=pa_key.thumbprint, now=NOW)
    forged = proof(
        pa_key, "POST", URL, token, now=NOW, signing_key=ec.generate_private_key(ec.SECP256R1())
    )
    stale = proof(pa_key, "POST", URL, token, now=NOW - 91)
    good = proof(pa_key, "POST", URL, token, now=NOW)
    assert forged.partition(".")[0] == stale.partition(".")[0] == good.partition(".")[0]


def test_proof_headers_are_remembered_only_for_verified_requests(
    issuer: Issuer, pa_key: DPoPKey
) -> None:
    verify = verifier()
    token = issuer.token(jkt=pa_key.thumbprint, now=NOW)
    other = DPoPKey()
    attempts = [
        (token, proof(other, "POST", URL, token, now=NOW)),  # not the token's key
        (token, proof(pa_key, "POST", URL, token, now=NOW, signing_key=other.private_key)),
        (issuer.token(jkt=pa_key.thumbprint, now=NOW, aud="https://api.example/other"), None),
    ]
    for bad_token, signed in attempts:
        refused(
            request_info(
                "POST", URL, bad_token, signed or proof(pa_key, "POST", URL, bad_token, now=NOW)
            ),
            verify,
        )
    assert len(verify.proof_keys) == 0
    assert verify(request_info("POST", URL, token, proof(pa_key, "POST", URL, token, now=NOW)))
    assert len(verify.proof_keys) == 1


def test_proof_headers_are_not_remembered_with_the_cache_off(
    settings: Any, issuer: Issuer, pa_key: DPoPKey
) -> None:
    dpop_poppy(settings, issuer, VERIFIED_TOKEN_CACHE_SIZE=0)
    verify = verifier()
    token = issuer.token(jkt=pa_key.thumbprint, now=NOW)
    for _ in range(2):
        assert verify(request_info("GET", URL, token, proof(pa_key, "GET", URL, token, now=NOW)))
    assert len(verify.proof_keys) == 0


def _hs256_token_with_public_key(issuer: Issuer, pa_key: DPoPKey) -> str:
    alg, key = issuer.keys[issuer.kid]
    pem = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    header = {"alg": "HS256", "typ": "JWT", "kid": issuer.kid}
    body = issuer.claims(jkt=pa_key.thumbprint, now=NOW)
    signing_input = b64url(json.dumps(header).encode()) + "." + b64url(json.dumps(body).encode())
    import hmac as hmac_module

    return (
        signing_input
        + "."
        + b64url(hmac_module.new(pem, signing_input.encode(), hashlib.sha256).digest())
    )


TOKEN_CASES: dict[str, Callable[[Issuer, DPoPKey], str | None]] = {
    "no token": lambda i, k: None,
    "alg none": lambda i, k: _unsigned(
        {"alg": "none", "kid": i.kid}, i.claims(jkt=k.thumbprint, now=NOW)
    ),
    "hmac with the public key": _hs256_token_with_public_key,
    "expired": lambda i, k: i.token(jkt=k.thumbprint, now=NOW - 1000, ttl=600),
    "no exp": lambda i, k: i.sign({**i.claims(jkt=k.thumbprint, now=NOW), "exp": None}),
    "not yet valid": lambda i, k: i.token(jkt=k.thumbprint, now=NOW, nbf=NOW + 120),
    "issued in the future": lambda i, k: i.token(jkt=k.thumbprint, now=NOW + 120),
    "wrong issuer": lambda i, k: i.token(jkt=k.thumbprint, now=NOW, iss="https://evil.example"),
    "no issuer": lambda i, k: i.sign(
        {n: v for n, v in i.claims(jkt=k.thumbprint, now=NOW).items() if n != "iss"}
    ),
    "wrong audience": lambda i, k: i.token(
        jkt=k.thumbprint, now=NOW, aud="https://api.example/other"
    ),
    "audience of another host": lambda i, k: i.token(
        jkt=k.thumbprint, now=NOW, aud="https://evil.example/poppy/conversations"
    ),
    "no audience": lambda i, k: i.token(jkt=k.thumbprint, now=NOW, aud=None),
    "unknown kid": lambda i, k: (lambda other: other.token(jkt=k.thumbprint, now=NOW, kid="k2"))(
        Issuer(kid="k2")
    ),
    "signed by another key with a known kid": lambda i, k: Issuer(kid=i.kid).token(
        jkt=k.thumbprint, now=NOW
    ),
    "tampered payload": lambda i, k: tamper(
        i.token(jkt=k.thumbprint, now=NOW), 1, lambda c: c.update(sub="victim")
    ),
    "malformed base64": lambda i, k: "e30!.e30.e30",
    "malformed json": lambda i, k: b64url(b'{"alg":') + ".e30.e30",
    "oversized": lambda i, k: i.token(jkt=k.thumbprint, now=NOW, pad="x" * 9000),
    "no client id": lambda i, k: i.token(jkt=k.thumbprint, now=NOW, client_id=None),
    "no user": lambda i, k: i.token(jkt=k.thumbprint, now=NOW, sub=""),
    "signed in without account": lambda i, k: i.token(jkt=k.thumbprint, now=NOW, signed_in=True),
    "signed-in flag not a boolean": lambda i, k: i.token(
        jkt=k.thumbprint, now=NOW, account="a", signed_in="yes"
    ),
    "scope of the wrong type": lambda i, k: i.token(jkt=k.thumbprint, now=NOW, scope=5),
    "a proof used as token": lambda i, k: i.sign(
        i.claims(jkt=k.thumbprint, now=NOW), headers={"typ": "dpop+jwt"}
    ),
}


@pytest.mark.parametrize("case", sorted(TOKEN_CASES))
def test_broken_token_is_refused(case: str, issuer: Issuer, pa_key: DPoPKey) -> None:
    token = TOKEN_CASES[case](issuer, pa_key)
    signed = proof(pa_key, "POST", URL, token, now=NOW)
    refusal = refused(request_info("POST", URL, token, signed))
    assert (refusal.error, refusal.status) == ("invalid_token", 401)


@pytest.mark.parametrize("scheme", ["Bearer", "bearer", "Basic", "PoppyFake"])
def test_other_schemes_are_refused(scheme: str, issuer: Issuer, pa_key: DPoPKey) -> None:
    token = issuer.token(jkt=pa_key.thumbprint, now=NOW)
    info = request_info(
        "POST", URL, token, proof(pa_key, "POST", URL, token, now=NOW), scheme=scheme
    )
    assert refused(info).error == "invalid_token"


def test_token_without_cnf_is_refused(issuer: Issuer, pa_key: DPoPKey) -> None:
    claims = issuer.claims(jkt=pa_key.thumbprint, now=NOW)
    del claims["cnf"]
    token = issuer.sign(claims)
    assert (
        refused(request_info("POST", URL, token, proof(pa_key, "POST", URL, token, now=NOW))).error
        == "invalid_dpop_proof"
    )


def test_replayed_jti_is_refused(issuer: Issuer, pa_key: DPoPKey) -> None:
    token = issuer.token(jkt=pa_key.thumbprint, now=NOW)
    signed = proof(pa_key, "POST", URL, token, now=NOW)
    verify = verifier()
    assert verify(request_info("POST", URL, token, signed))
    assert refused(request_info("POST", URL, token, signed), verify).error == "invalid_dpop_proof"
    # A refused request does not spend its jti: the same proof with a valid token later works.
    other = proof(pa_key, "POST", URL, token, now=NOW, jti="kept")
    refused(request_info("POST", URL, token[:-4] + "AAAA", other), verify)
    assert verify(request_info("POST", URL, token, other))


def test_descriptions_never_say_which_check_failed(issuer: Issuer, pa_key: DPoPKey) -> None:
    token = issuer.token(jkt=pa_key.thumbprint, now=NOW)
    seen = {
        refused(
            request_info("POST", URL, token, proof(pa_key, "GET", URL, token, now=NOW))
        ).description,
        refused(
            request_info("POST", URL, token, proof(pa_key, "POST", URL, token, now=NOW - 500))
        ).description,
        refused(
            request_info("POST", URL, token, proof(DPoPKey(), "POST", URL, token, now=NOW))
        ).description,
    }
    assert seen == {dpop.DESCRIPTIONS["invalid_dpop_proof"]}


# -- nonces, scopes ------------------------------------------------------------------------


def test_nonce_required(settings: Any, issuer: Issuer, pa_key: DPoPKey) -> None:
    dpop_poppy(settings, issuer, REQUIRE_NONCE=True, NONCE_LIFETIME_SECONDS=300)
    token = issuer.token(jkt=pa_key.thumbprint, now=NOW)
    refusal = refused(request_info("POST", URL, token, proof(pa_key, "POST", URL, token, now=NOW)))
    assert (refusal.error, refusal.status) == ("use_dpop_nonce", 401)
    nonce = refusal.headers["DPoP-Nonce"]
    # Another process (another verifier instance) accepts it: nothing is stored.
    assert verifier()(
        request_info("POST", URL, token, proof(pa_key, "POST", URL, token, now=NOW, nonce=nonce))
    )
    # Still valid in the next window, stale after it.
    later = dpop.build_verifier(clock=lambda: NOW + 300)
    assert later(
        request_info(
            "POST", URL, token, proof(pa_key, "POST", URL, token, now=NOW + 300, nonce=nonce)
        )
    )
    stale = dpop.build_verifier(clock=lambda: NOW + 600)
    refusal = refused(
        request_info(
            "POST", URL, token, proof(pa_key, "POST", URL, token, now=NOW + 600, nonce=nonce)
        ),
        stale,
    )
    assert refusal.error == "use_dpop_nonce" and refusal.headers["DPoP-Nonce"] != nonce
    forged = nonce[:-2] + ("AA" if not nonce.endswith("AA") else "BB")
    assert (
        refused(
            request_info(
                "POST", URL, token, proof(pa_key, "POST", URL, token, now=NOW, nonce=forged)
            )
        ).error
        == "use_dpop_nonce"
    )


def test_nonce_secret_derives_from_secret_key(settings: Any) -> None:
    nonce = nonces.issue(NOW, lifetime=60)
    assert nonces.is_valid(nonce, NOW, lifetime=60)
    settings.SECRET_KEY = "another-secret"
    assert not nonces.is_valid(nonce, NOW, lifetime=60)


def test_required_scope(settings: Any, issuer: Issuer, pa_key: DPoPKey) -> None:
    dpop_poppy(settings, issuer, REQUIRED_SCOPE="poppy:read")

    def ask(**claims: Any) -> Any:
        token = issuer.token(jkt=pa_key.thumbprint, now=NOW, **claims)
        return request_info("POST", URL, token, proof(pa_key, "POST", URL, token, now=NOW))

    refusal = refused(ask(scope="poppy:read"))
    assert (refusal.error, refusal.status) == ("sign_in_required", 403)
    refusal = refused(ask(account="acct-1", scope="poppy:write"))
    assert (refusal.error, refusal.status) == ("insufficient_scope", 403)
    assert 'scope="poppy:read"' in refusal.www_authenticate
    assert verifier()(ask(account="acct-1", scope="poppy:write poppy:read")).signed_in


def test_replay_cache_is_shared_through_redis(
    settings: Any, issuer: Issuer, pa_key: DPoPKey
) -> None:
    """Two verifiers (as two processes would) share the jti cache through Redis."""
    settings.CACHES = {
        **settings.CACHES,
        "poppy-replay": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": "redis://127.0.0.1:6379/3",
        },
    }
    dpop_poppy(settings, issuer, REPLAY_CACHE="poppy-replay")
    token = issuer.token(jkt=pa_key.thumbprint, now=NOW)
    signed = proof(pa_key, "POST", URL, token, now=NOW)
    assert verifier()(request_info("POST", URL, token, signed))
    assert (
        refused(request_info("POST", URL, token, signed), verifier()).error == "invalid_dpop_proof"
    )


def test_verify_uses_the_configured_verifier(issuer: Issuer, pa_key: DPoPKey) -> None:
    """The module-level entry point (what AUTHENTICATE names) works with the real clock."""
    import time

    now = time.time()
    token = issuer.token(jkt=pa_key.thumbprint, now=now)
    assert dpop.verify(
        request_info("POST", URL, token, pa_key.proof("POST", URL, access_token=token))
    )


def test_asymmetric_algorithms_outside_the_configured_lists_are_refused(
    settings: Any, pa_key: DPoPKey
) -> None:
    """ES384 is a fine algorithm, but not one the (default) lists allow."""
    p384 = ec.generate_private_key(ec.SECP384R1())
    issuer = Issuer()
    issuer.keys["k384"] = ("ES384", p384)
    dpop_poppy(settings, issuer)
    token = issuer.token(jkt=pa_key.thumbprint, now=NOW, kid="k384")
    signed = proof(pa_key, "POST", URL, token, now=NOW)
    assert refused(request_info("POST", URL, token, signed)).error == "invalid_token"

    token = issuer.token(jkt=thumbprint(public_jwk(p384.public_key())), now=NOW)
    jwk = public_jwk(p384.public_key())
    signed = proof(
        pa_key, "POST", URL, token, now=NOW, header={"jwk": jwk}, signing_key=p384, alg="ES384"
    )
    assert refused(request_info("POST", URL, token, signed)).error == "invalid_dpop_proof"

    # Narrowed lists: RS256 tokens and EdDSA proofs are refused, ES256 still accepted.
    rsa_issuer = Issuer(alg="RS256")
    dpop_poppy(settings, rsa_issuer, ALGORITHMS=["ES256"], DPOP_ALGORITHMS=["ES256"])
    token = rsa_issuer.token(jkt=pa_key.thumbprint, now=NOW)
    assert (
        refused(request_info("POST", URL, token, proof(pa_key, "POST", URL, token, now=NOW))).error
        == "invalid_token"
    )
