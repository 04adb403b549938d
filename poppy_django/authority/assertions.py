"""The two JWTs a personal agent signs at the token endpoint (Poppy draft 0.2 §4.1, §4.2).

- The **client assertion** (``private_key_jwt``, RFC 7523 §2.2): ``iss`` = ``sub`` = the
  client_id; refused with 401 ``invalid_client``.
- The **Session assertion** (JWT bearer grant, RFC 7523 §2.1): ``iss`` = the client_id,
  ``sub`` = the pairwise User id; refused with 400 ``invalid_grant``.

Both: ``aud`` is the issuer, one string compared character for character (never the token
endpoint, never an array); ES256 or RS256 with a key of the client's published JWKS (a key
embedded in the header is never used, ``none`` and HMAC never accepted); ``exp`` after
``iat`` by at most five minutes, within the leeway of now; a ``jti`` used once.
"""

from __future__ import annotations

import re
import time
from typing import Any

import jwt
from authlib.oauth2 import OAuth2Error
from authlib.oauth2.rfc6749 import InvalidGrantError

from poppy_django.authority.clients import client_key
from poppy_django.authority.conf import authority_settings
from poppy_django.authority.errors import UnauthorizedClient
from poppy_django.authority.models import Client
from poppy_django.verifier import replay

ALGORITHMS = ("ES256", "RS256")
MAX_LIFETIME_SECONDS = 300
_JTI = re.compile(r"[A-Za-z0-9_-]{16,256}")
_USER_ID = re.compile(r"[A-Za-z0-9_-]{1,256}")
#: The only JWT types an assertion may declare; a browser assertion is refused here.
_TYPES = frozenset({"jwt"})


class _Check:
    """One assertion's checks, refused with ``error`` (the class) and a fixed description."""

    def __init__(self, error: type[OAuth2Error], what: str) -> None:
        self.error = error
        self.what = what

    def refuse(self) -> OAuth2Error:
        return self.error(f"The {self.what} is not valid.")

    def verify(self, token: Any, client: Client, issuer: str, now: float) -> dict[str, Any]:
        if not isinstance(token, str) or not token or len(token) > 8192:
            raise self.refuse()
        try:
            header = jwt.get_unverified_header(token)
        except jwt.InvalidTokenError:
            raise self.refuse() from None
        alg = header.get("alg")
        typ = header.get("typ")
        if alg not in ALGORITHMS or (typ is not None and str(typ).lower() not in _TYPES):
            raise self.refuse()
        key = client_key(client, header.get("kid"), str(alg))
        if key is None:
            raise self.refuse()
        try:
            claims = jwt.decode(
                token,
                key,
                algorithms=[str(alg)],
                options={
                    "verify_aud": False,
                    "verify_exp": False,
                    "verify_iat": False,
                    "verify_nbf": False,
                },
            )
        except jwt.InvalidTokenError:
            raise self.refuse() from None
        self._check_claims(claims, client, issuer, now)
        return claims

    def _check_claims(
        self, claims: dict[str, Any], client: Client, issuer: str, now: float
    ) -> None:
        leeway = float(authority_settings().LEEWAY_SECONDS)
        iat, exp, jti = claims.get("iat"), claims.get("exp"), claims.get("jti")
        if claims.get("iss") != client.client_id or claims.get("aud") != issuer:
            raise self.refuse()
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (iat, exp)):
            raise self.refuse()
        assert isinstance(iat, int) and isinstance(exp, int)
        if not 0 < exp - iat <= MAX_LIFETIME_SECONDS:
            raise self.refuse()
        if iat > now + leeway or exp <= now - leeway:
            raise self.refuse()
        if not isinstance(jti, str) or not _JTI.fullmatch(jti):
            raise self.refuse()
        if not replay.first_use(
            f"assertion:{client.client_id}",
            jti,
            ttl=exp - now + 2 * leeway,
            alias=str(authority_settings().REPLAY_CACHE),
        ):
            raise self.refuse()


_CLIENT = _Check(UnauthorizedClient, "client assertion")
_SESSION = _Check(InvalidGrantError, "Session assertion")


def verify_client_assertion(
    form: dict[str, str], client: Client, issuer: str, *, now: float | None = None
) -> None:
    """Authenticate the client by its ``client_assertion`` (401 ``invalid_client``)."""
    if (
        form.get("client_assertion_type")
        != "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
    ):
        raise UnauthorizedClient("The client must authenticate with private_key_jwt.")
    claims = _CLIENT.verify(
        form.get("client_assertion"), client, issuer, time.time() if now is None else now
    )
    if claims.get("sub") != client.client_id:
        raise _CLIENT.refuse()


def verify_session_assertion(
    assertion: Any, client: Client, issuer: str, *, now: float | None = None
) -> str:
    """The pairwise User id a valid Session assertion names (400 ``invalid_grant``)."""
    claims = _SESSION.verify(assertion, client, issuer, time.time() if now is None else now)
    user_id = claims.get("sub")
    if not isinstance(user_id, str) or not _USER_ID.fullmatch(user_id):
        raise _SESSION.refuse()
    return user_id
