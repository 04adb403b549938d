"""A personal agent's side of an authorization server, over raw HTTP (sync, httpx).

What ``poppy_chat --authority`` uses, and what docs/agent-walkthrough.md shows request by
request: a client identity (an HTTPS ``client_id`` and its ES256 key, published as a JWKS or
pre-registered with the company), a Session started with the JWT-bearer grant (a Session
assertion for the pairwise User, a ``private_key_jwt`` client assertion per RFC 7523, a DPoP
proof for the token endpoint), its renewal with ``session_id``, and Device Sign-In (RFC 8628:
``device_authorization``, then the ``device_code`` grant with the Session's ``session_id``).

Needs ``httpx`` (the ``client`` extra), like :mod:`poppy_django.client`.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec

from poppy_django.client import USER_AGENT, DPoPKey, PoppyClientError
from poppy_django.verifier.jwk import public_jwk, thumbprint

try:
    import httpx
except ModuleNotFoundError as error:  # the client extra is not installed
    raise ModuleNotFoundError(
        "poppy_django.signin_client needs httpx: pip install 'poppy-django[client]'", name="httpx"
    ) from error

JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
DEVICE_CODE = "urn:ietf:params:oauth:grant-type:device_code"
CLIENT_ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
#: Assertions live one minute (the authority accepts at most five).
ASSERTION_SECONDS = 60


@dataclass
class ClientIdentity:
    """A personal agent's identity: its ``client_id`` and the ES256 key its JWKS publishes."""

    client_id: str
    private_key: ec.EllipticCurvePrivateKey = field(
        default_factory=lambda: ec.generate_private_key(ec.SECP256R1())
    )

    @property
    def kid(self) -> str:
        return thumbprint(public_jwk(self.private_key.public_key()))

    def jwks(self) -> dict[str, Any]:
        """The public JWKS: what the client's ``jwks_uri`` serves, or staff pre-register."""
        key = {**public_jwk(self.private_key.public_key()), "kid": self.kid}
        return {"keys": [{**key, "alg": "ES256", "use": "sig"}]}

    def assertion(self, subject: str, audience: str) -> str:
        """A signed assertion: ``sub`` = the pairwise User (a Session assertion) or the
        ``client_id`` itself (a client assertion); ``aud`` = the issuer, one string."""
        now = int(time.time())
        claims = {
            "iss": self.client_id,
            "sub": subject,
            "aud": audience,
            "iat": now,
            "exp": now + ASSERTION_SECONDS,
            "jti": secrets.token_urlsafe(16),
        }
        return jwt.encode(
            claims, self.private_key, algorithm="ES256", headers={"kid": self.kid, "typ": "JWT"}
        )


@dataclass(frozen=True)
class DeviceSignIn:
    """A started Device Sign-In: what to show the User, and what to poll with."""

    device_code: str
    user_code: str
    verification_uri: str
    verification_uri_complete: str | None
    interval: float
    expires_in: float


class AuthorityClient:
    """Sessions and Device Sign-In at one issuer, for one personal agent and DPoP key."""

    def __init__(
        self,
        origin: str,
        identity: ClientIdentity,
        key: DPoPKey,
        *,
        http: httpx.Client | None = None,
        verify: bool = True,
    ) -> None:
        self.origin = origin.rstrip("/")
        self.identity = identity
        self.key = key
        self.nonce: str | None = None
        self.http = http or httpx.Client(
            timeout=30, verify=verify, headers={"User-Agent": USER_AGENT}
        )
        self._metadata: dict[str, Any] | None = None

    def metadata(self) -> dict[str, Any]:
        """The authority's RFC 8414 metadata at ``origin`` (its issuer, its endpoints), once."""
        if self._metadata is None:
            response = self.http.get(f"{self.origin}/.well-known/oauth-authorization-server")
            self._metadata = self._answer(response)
        return self._metadata

    @property
    def issuer(self) -> str:
        """Every assertion's ``aud``: the metadata's ``issuer``, exactly as written there."""
        return str(self.metadata()["issuer"])

    def _client_form(self) -> dict[str, str]:
        """RFC 7523 client authentication (``private_key_jwt``): the same for every endpoint."""
        return {
            "client_id": self.identity.client_id,
            "client_assertion_type": CLIENT_ASSERTION_TYPE,
            "client_assertion": self.identity.assertion(self.identity.client_id, self.issuer),
        }

    def _post(self, url: str, form: dict[str, str], *, dpop: bool) -> httpx.Response:
        """A form POST; with a DPoP proof (no ``ath``) when asked, once more with a nonce."""
        for attempt in (1, 2):
            headers = {"DPoP": self.key.proof("POST", url, nonce=self.nonce)} if dpop else {}
            response = self.http.post(url, data=form, headers=headers)
            if "DPoP-Nonce" in response.headers:
                self.nonce = response.headers["DPoP-Nonce"]
            if attempt == 1 and dpop and _error(response) == "use_dpop_nonce":
                continue
            return response
        raise AssertionError("unreachable")

    def _token(self, form: dict[str, str]) -> dict[str, Any]:
        url = self.metadata()["token_endpoint"]
        return self._answer(self._post(url, {**form, **self._client_form()}, dpop=True))

    def start_session(self, user: str) -> dict[str, Any]:
        """A signed-out Session for the pairwise ``user``: the token answer (``access_token``,
        ``token_type`` DPoP, ``expires_in``, ``session_id``, ``signed_in`` false)."""
        return self._token(
            {"grant_type": JWT_BEARER, "assertion": self.identity.assertion(user, self.issuer)}
        )

    def renew(self, user: str, session_id: str) -> dict[str, Any]:
        """The same request with the Session's ``session_id``: a fresh token, same Session."""
        return self._token(
            {
                "grant_type": JWT_BEARER,
                "assertion": self.identity.assertion(user, self.issuer),
                "session_id": session_id,
            }
        )

    def begin_device_sign_in(self, scopes: list[str]) -> DeviceSignIn:
        """RFC 8628 §3.1: a code for the User to enter on the company's page."""
        url = self.metadata()["device_authorization_endpoint"]
        form = {**self._client_form(), "scope": " ".join(scopes)}
        body = self._answer(self._post(url, form, dpop=False))
        return DeviceSignIn(
            device_code=body["device_code"],
            user_code=body["user_code"],
            verification_uri=body["verification_uri"],
            verification_uri_complete=body.get("verification_uri_complete"),
            interval=float(body.get("interval", 5)),
            expires_in=float(body.get("expires_in", 600)),
        )

    def poll_device_sign_in(self, started: DeviceSignIn, session_id: str) -> dict[str, Any] | None:
        """One poll: the signed-in token answer (with ``refresh_token``, the Account Token),
        or None while the User has not decided (``authorization_pending``, ``slow_down``)."""
        try:
            return self._token(
                {
                    "grant_type": DEVICE_CODE,
                    "device_code": started.device_code,
                    "session_id": session_id,
                }
            )
        except PoppyClientError as exc:
            if exc.error in ("authorization_pending", "slow_down"):
                return None
            raise

    def wait_for_device_sign_in(
        self, started: DeviceSignIn, session_id: str, *, timeout: float | None = None
    ) -> dict[str, Any]:
        """Poll at the server's interval until the User decides (or the code expires)."""
        deadline = time.monotonic() + (started.expires_in if timeout is None else timeout)
        interval = started.interval
        while time.monotonic() < deadline:
            time.sleep(interval)
            answer = self.poll_device_sign_in(started, session_id)
            if answer is not None:
                return answer
        raise PoppyClientError(400, "expired_token", "The User did not sign in in time.", None)

    @staticmethod
    def _answer(response: httpx.Response) -> dict[str, Any]:
        try:
            body = response.json()
        except ValueError:
            body = {"error": "invalid_response", "error_description": response.text[:200]}
        if response.status_code >= 400 or not isinstance(body, dict):
            body = body if isinstance(body, dict) else {}
            raise PoppyClientError(
                response.status_code,
                str(body.get("error", "error")),
                body.get("error_description"),
                body,
            )
        return body


def _error(response: httpx.Response) -> str | None:
    try:
        body = response.json()
    except ValueError:
        return None
    return body.get("error") if isinstance(body, dict) else None
