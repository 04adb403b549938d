"""A hand-made personal agent for the token endpoint: every assertion and proof built here.

The SDK never sends a malformed request; these tests do, through Django's test client, to
the same URLs the SDK uses.
"""

from __future__ import annotations

import json
import secrets
import time
from typing import Any
from urllib.parse import urlencode

import jwt
from cryptography.hazmat.primitives.asymmetric import ec
from django.test import Client
from personal_agent_protocol.demo.kit import AgentIdentity

from tests.authority import network
from tests.authority.sdk_agent import DOMAIN, ORIGIN

TOKEN_URL = f"{ORIGIN}/oauth/token"
JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
CLIENT_ASSERTION = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"


class HandAgent:
    """One personal agent (its identity served on the test network) and one DPoP key."""

    def __init__(self, domain: str = "hand.example") -> None:
        self.identity = AgentIdentity(domain=domain, name="Hand")
        network.serve_identity(self.identity)
        self.dpop_key = ec.generate_private_key(ec.SECP256R1())
        self.http = Client()

    @property
    def client_id(self) -> str:
        return self.identity.client_id

    def signed(self, claims: dict[str, Any], **header: Any) -> str:
        return jwt.encode(
            claims,
            self.identity.private_key,
            algorithm="ES256",
            headers={"kid": self.identity.kid, "typ": "JWT", **header},
        )

    def claims(self, subject: str, **overrides: Any) -> dict[str, Any]:
        now = int(time.time())
        return {
            "iss": self.client_id,
            "sub": subject,
            "aud": ORIGIN,
            "iat": now,
            "exp": now + 60,
            "jti": secrets.token_urlsafe(16),
            **overrides,
        }

    def client_form(self, **overrides: Any) -> dict[str, str]:
        return {
            "client_id": self.client_id,
            "client_assertion_type": CLIENT_ASSERTION,
            "client_assertion": self.signed(self.claims(self.client_id)),
            **overrides,
        }

    def proof(self, url: str = TOKEN_URL, method: str = "POST", **claims: Any) -> str:
        public = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(self.dpop_key.public_key()))
        return jwt.encode(
            {"htm": method, "htu": url, "iat": int(time.time()), "jti": secrets.token_urlsafe(16)}
            | claims,
            self.dpop_key,
            algorithm="ES256",
            headers={"typ": "dpop+jwt", "jwk": public},
        )

    def post(self, path: str, form: dict[str, str], *, dpop: str | None = None) -> Any:
        extra = {"HTTP_DPOP": dpop} if dpop is not None else {}
        return self.http.post(
            path,
            data=urlencode(form),
            content_type="application/x-www-form-urlencoded",
            secure=True,
            HTTP_HOST=DOMAIN,
            **extra,
        )

    def start_session(self, user: str = "usr_hand_000000000000001", **form: str) -> Any:
        body = {
            "grant_type": JWT_BEARER,
            "assertion": self.signed(self.claims(user)),
            **self.client_form(),
            **form,
        }
        return self.post("/oauth/token", body, dpop=self.proof())
