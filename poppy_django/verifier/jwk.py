"""JSON Web Keys: RFC 7638 thumbprints and public keys that fit exactly one algorithm.

Shared by the verifier (proof keys, issuer keys), the development authority and the client,
so a thumbprint is computed one way everywhere.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Mapping
from typing import Any, TypeAlias

from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, rsa
from jwt.algorithms import ECAlgorithm, OKPAlgorithm, RSAAlgorithm

#: Members that only a private (or symmetric) key has: a proof carrying one is refused.
PRIVATE_MEMBERS = frozenset({"d", "p", "q", "dp", "dq", "qi", "oth", "k"})
#: RFC 7638 §3.2: the required members of each key type, in lexicographic order.
THUMBPRINT_MEMBERS = {
    "EC": ("crv", "kty", "x", "y"),
    "RSA": ("e", "kty", "n"),
    "OKP": ("crv", "kty", "x"),
}
#: The curve an ``ES*`` algorithm requires (RFC 7518 §3.4).
EC_CURVES = {"ES256": "P-256", "ES384": "P-384", "ES512": "P-521"}
#: RSA keys shorter than this are refused (RFC 7518 §3.3 asks for at least 2048 bits).
MIN_RSA_BITS = 2048

PublicKey: TypeAlias = (
    ec.EllipticCurvePublicKey | rsa.RSAPublicKey | ed25519.Ed25519PublicKey | ed448.Ed448PublicKey
)
PUBLIC_KEY_TYPES = (
    ec.EllipticCurvePublicKey,
    rsa.RSAPublicKey,
    ed25519.Ed25519PublicKey,
    ed448.Ed448PublicKey,
)


class JWKError(ValueError):
    """The JWK is malformed, private, or does not fit the algorithm."""


def b64url(data: bytes) -> str:
    """Unpadded base64url (RFC 7515 §2)."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def thumbprint(jwk: Mapping[str, Any]) -> str:
    """The RFC 7638 SHA-256 thumbprint of a public JWK (what ``cnf.jkt`` names)."""
    members = THUMBPRINT_MEMBERS.get(str(jwk.get("kty")))
    if members is None:
        raise JWKError("Unsupported key type.")
    try:
        canonical = {name: jwk[name] for name in members}
    except KeyError as exc:
        raise JWKError("A required JWK member is missing.") from exc
    if not all(isinstance(value, str) for value in canonical.values()):
        raise JWKError("JWK members must be strings.")
    encoded = json.dumps(canonical, separators=(",", ":"), sort_keys=True).encode()
    return b64url(hashlib.sha256(encoded).digest())


def public_key_for(jwk: Any, alg: str, *, allow_private: bool = False) -> PublicKey:
    """The public key of ``jwk`` if it is usable with ``alg``; else :class:`JWKError`.

    ``allow_private`` is for configured key sets (the private part is dropped); a key that
    arrives in a request must be public only.
    """
    if not isinstance(jwk, Mapping):
        raise JWKError("A JWK must be an object.")
    private = PRIVATE_MEMBERS & set(jwk)
    if private and not allow_private:
        raise JWKError("The JWK has private members.")
    public = {name: value for name, value in jwk.items() if name not in PRIVATE_MEMBERS}
    kty = public.get("kty")
    key_alg = public.get("alg")
    if key_alg is not None and key_alg != alg:
        raise JWKError("The JWK is for another algorithm.")
    try:
        if alg in EC_CURVES:
            if kty != "EC" or public.get("crv") != EC_CURVES[alg]:
                raise JWKError("The JWK does not fit the algorithm.")
            key: Any = ECAlgorithm.from_jwk(dict(public))
        elif alg.startswith(("RS", "PS")):
            if kty != "RSA":
                raise JWKError("The JWK does not fit the algorithm.")
            key = RSAAlgorithm.from_jwk(dict(public))
        elif alg == "EdDSA":
            if kty != "OKP" or public.get("crv") not in ("Ed25519", "Ed448"):
                raise JWKError("The JWK does not fit the algorithm.")
            key = OKPAlgorithm.from_jwk(dict(public))
        else:
            raise JWKError("Unsupported algorithm.")
    except JWKError:
        raise
    except Exception as exc:  # pyjwt raises several types for malformed members
        raise JWKError("Malformed JWK.") from exc
    if isinstance(key, rsa.RSAPublicKey) and key.key_size < MIN_RSA_BITS:
        raise JWKError("The RSA key is too short.")
    if not isinstance(key, PUBLIC_KEY_TYPES):
        raise JWKError("Not a public key.")
    return key


def public_jwk(key: PublicKey) -> dict[str, Any]:
    """The public JWK of a key, without ``kid``/``alg``/``use``."""
    if isinstance(key, ec.EllipticCurvePublicKey):
        jwk = ECAlgorithm.to_jwk(key, as_dict=True)
    elif isinstance(key, rsa.RSAPublicKey):
        jwk = RSAAlgorithm.to_jwk(key, as_dict=True)
    else:
        jwk = OKPAlgorithm.to_jwk(key, as_dict=True)
    return {name: value for name, value in jwk.items() if name not in PRIVATE_MEMBERS}
