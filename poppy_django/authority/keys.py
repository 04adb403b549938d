"""The authority's one ES256 signing key and the JWKS the verifier checks its tokens with.

Where the key comes from, first found wins:

1. the environment variable ``POPPY_AUTHORITY_SIGNING_KEY`` (a PEM);
2. ``POPPY_AUTHORITY["SIGNING_KEY_FILE"]`` (a PEM file made by the deployment);
3. in development mode (``POPPY["DEV_AUTHORITY"]``, :mod:`poppy_django.authority.development`)
   the generated development key: ``$POPPY_DEV_SIGNING_KEY``, else its key file, created
   once on first use.

The token endpoint, ``poppy_token`` and the JWKS the verifier trusts all read
:func:`signing_key`, so there is one key for one verifier by construction.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from django.core.exceptions import ImproperlyConfigured

from poppy_django.authority import development
from poppy_django.authority.conf import authority_settings
from poppy_django.files import made_once
from poppy_django.verifier.jwk import public_jwk, thumbprint

ENV_KEY = "POPPY_AUTHORITY_SIGNING_KEY"
ALGORITHM = "ES256"


def load_pem(pem: bytes, origin: str) -> ec.EllipticCurvePrivateKey:
    """A P-256 private key from a PEM, or ``ImproperlyConfigured`` naming where it came from."""
    try:
        key = serialization.load_pem_private_key(pem, password=None)
    except ValueError as exc:
        raise ImproperlyConfigured(f"The authority's signing key in {origin} is no PEM.") from exc
    if not isinstance(key, ec.EllipticCurvePrivateKey) or key.curve.name != "secp256r1":
        raise ImproperlyConfigured(f"The authority's signing key in {origin} is not P-256 (ES256).")
    return key


def new_pem() -> bytes:
    """A fresh P-256 private key as an unencrypted PKCS#8 PEM."""
    return ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


@functools.lru_cache(maxsize=8)
def _key(
    env_name: str, env_pem: str | None, path: str | None, create: bool
) -> ec.EllipticCurvePrivateKey:
    if env_pem:
        return load_pem(env_pem.encode(), f"${env_name}")
    assert path is not None
    # Creating is atomic (files.made_once): two processes starting at once agree on one key.
    pem = made_once(Path(path), new_pem) if create else Path(path).read_bytes()
    return load_pem(pem, path)


def deployment_key_configured() -> bool:
    """Whether the deployment gave a key (environment or file), rather than development mode."""
    return bool(os.environ.get(ENV_KEY) or authority_settings().SIGNING_KEY_FILE)


def key_refusal() -> str | None:
    """Why there is no signing key here, or None when :func:`signing_key` has one."""
    if deployment_key_configured():
        return None
    if development.enabled():
        return None
    if development.configured():
        return development.disabled_reason()
    return f'The authority needs a signing key: ${ENV_KEY} or POPPY_AUTHORITY["SIGNING_KEY_FILE"].'


def signing_key() -> ec.EllipticCurvePrivateKey:
    """The private key Session Tokens are signed with (cached per process and source)."""
    env_pem = os.environ.get(ENV_KEY) or None
    path = authority_settings().SIGNING_KEY_FILE
    if env_pem or path:
        return _key(ENV_KEY, env_pem, path, False)
    refusal = key_refusal()
    if refusal is not None:
        raise ImproperlyConfigured(refusal)
    # Development mode: the generated key.
    dev_pem = os.environ.get(development.ENV_KEY) or None
    return _key(development.ENV_KEY, dev_pem, str(development.key_file()), True)


def jwks_of(key: ec.EllipticCurvePrivateKey) -> dict[str, Any]:
    """The public JWKS of ``key``: one ES256 key whose ``kid`` is its RFC 7638 thumbprint."""
    jwk = public_jwk(key.public_key())
    return {"keys": [{**jwk, "kid": thumbprint(jwk), "alg": ALGORITHM, "use": "sig"}]}


def jwks_of_file(path: str | Path) -> dict[str, Any]:
    """The public JWKS of a PEM key file, for ``POPPY["TOKENS"]["JWKS"]`` in settings."""
    return jwks_of(load_pem(Path(path).read_bytes(), str(path)))


def public_jwks() -> dict[str, Any]:
    """The JWKS of the current signing key."""
    return jwks_of(signing_key())
