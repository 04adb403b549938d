"""The authority's ES256 signing key and the JWKS the verifier checks its tokens with.

Where the key comes from, first found wins: the environment variable
``POPPY_AUTHORITY_SIGNING_KEY`` (a PEM), ``POPPY_AUTHORITY["SIGNING_KEY_FILE"]``, else the
development authority's key (``POPPY["DEV_AUTHORITY"]``): then this authority *is* the
development authority's production form, and ``poppy_token`` and the token endpoint sign
with one key, for one verifier.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from django.core.exceptions import ImproperlyConfigured

from poppy_django.auth import dev_authority
from poppy_django.auth.jwk import public_jwk, thumbprint
from poppy_django.authority.conf import authority_settings

ENV_KEY = "POPPY_AUTHORITY_SIGNING_KEY"
ALGORITHM = "ES256"


def _load(pem: bytes, origin: str) -> ec.EllipticCurvePrivateKey:
    try:
        key = serialization.load_pem_private_key(pem, password=None)
    except ValueError as exc:
        raise ImproperlyConfigured(f"The authority's signing key in {origin} is no PEM.") from exc
    if not isinstance(key, ec.EllipticCurvePrivateKey) or key.curve.name != "secp256r1":
        raise ImproperlyConfigured(f"The authority's signing key in {origin} is not P-256.")
    return key


@functools.lru_cache(maxsize=4)
def _key(env_pem: str | None, path: str | None) -> ec.EllipticCurvePrivateKey:
    if env_pem:
        return _load(env_pem.encode(), f"${ENV_KEY}")
    assert path is not None
    return _load(Path(path).read_bytes(), path)


def signing_key() -> ec.EllipticCurvePrivateKey:
    """The private key Session Tokens are signed with (cached per process)."""
    env_pem = os.environ.get(ENV_KEY) or None
    path = authority_settings().SIGNING_KEY_FILE
    if env_pem or path:
        return _key(env_pem, path)
    if dev_authority.enabled():
        # Development mode: the development authority's key (it caches per key file).
        return dev_authority.signing_key()
    raise ImproperlyConfigured(
        f'The authority needs a signing key: ${ENV_KEY} or POPPY_AUTHORITY["SIGNING_KEY_FILE"].'
    )


def jwks_of(key: ec.EllipticCurvePrivateKey) -> dict[str, Any]:
    """The public JWKS of ``key``: one ES256 key whose ``kid`` is its RFC 7638 thumbprint."""
    jwk = public_jwk(key.public_key())
    return {"keys": [{**jwk, "kid": thumbprint(jwk), "alg": ALGORITHM, "use": "sig"}]}


def jwks_of_file(path: str | Path) -> dict[str, Any]:
    """The public JWKS of a PEM key file, for ``POPPY["TOKENS"]["JWKS"]`` in settings."""
    return jwks_of(_load(Path(path).read_bytes(), str(path)))


def public_jwks() -> dict[str, Any]:
    """The JWKS of the current signing key."""
    return jwks_of(signing_key())
