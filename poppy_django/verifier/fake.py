"""A verifier for tests and local tools: trusts an ``Authorization: PoppyFake <b64 json>`` header.

Never use it where the endpoint is reachable by others: it verifies nothing. Build the header
with :func:`fake_authorization`; ``refuse`` makes the verifier answer a refusal instead.

It runs only with ``DEBUG`` on (as the project's settings set it: a test run's forced
``DEBUG=False`` does not count) or with the explicit opt-in
``POPPY["ALLOW_FAKE_VERIFIER_WITHOUT_DEBUG"] = True``, which tests of a production-mode
deployment set. Otherwise every request is refused **at run time**: check E108 alone is not
enough, since ASGI servers such as uvicorn run no system checks.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
from collections.abc import Iterable

from poppy_django.conf import debug_configured, poppy_settings
from poppy_django.verifier.principal import Actor, AuthRefusal, Prepared, Principal, RequestInfo

SCHEME = "PoppyFake"
#: What a request is told when the fake verifier is configured where it may not run.
REFUSED_WITHOUT_DEBUG = (
    "The fake verifier is refused with DEBUG=False; "
    'POPPY["ALLOW_FAKE_VERIFIER_WITHOUT_DEBUG"] = True runs it anyway (tests only).'
)

logger = logging.getLogger("poppy_django.auth")
_logged_refusal = False


def allowed() -> bool:
    """Whether the fake verifier may run here: DEBUG on, or the explicit opt-in."""
    return poppy_settings.ALLOW_FAKE_VERIFIER_WITHOUT_DEBUG or debug_configured()


def fake_authorization(
    client_id: str = "https://agent.example/client",
    user_id: str = "user-1",
    *,
    account_id: str | None = None,
    scopes: Iterable[str] = (),
    session_id: str = "ses-test",
    actor_id: str | None = None,
    refuse: str | None = None,
) -> str:
    """The ``Authorization`` header value the fake verifier turns into this principal."""
    claims = {
        "client_id": client_id,
        "user_id": user_id,
        "account_id": account_id,
        "scopes": sorted(scopes),
        "session_id": session_id,
        "actor_id": actor_id,
        "refuse": refuse,
    }
    encoded = base64.urlsafe_b64encode(json.dumps(claims).encode()).decode().rstrip("=")
    return f"{SCHEME} {encoded}"


def verify(request: RequestInfo) -> Principal:
    """The fake verifier: ``POPPY = {"AUTHENTICATE": "poppy_django.verifier.fake.verify"}``.

    Refused (``401 invalid_token``; logged as an error once a process) where it may not run
    (:func:`allowed`).
    """
    global _logged_refusal
    if not allowed():
        if not _logged_refusal:
            _logged_refusal = True
            logger.error("poppy: requests refused: %s", REFUSED_WITHOUT_DEBUG)
        raise AuthRefusal("invalid_token", REFUSED_WITHOUT_DEBUG)
    scheme, _, credentials = request["headers"].get("authorization", "").partition(" ")
    if scheme != SCHEME or not credentials:
        raise AuthRefusal("invalid_token", "A PoppyFake authorization header is required.")
    try:
        padded = credentials + "=" * (-len(credentials) % 4)
        claims = json.loads(base64.urlsafe_b64decode(padded))
        client_id, user_id = str(claims["client_id"]), str(claims["user_id"])
    except (ValueError, KeyError, TypeError, binascii.Error) as exc:
        raise AuthRefusal("invalid_token", "Malformed PoppyFake credentials.") from exc
    if claims.get("refuse"):
        raise AuthRefusal(str(claims["refuse"]), "Refused by the fake verifier.")
    account_id = claims.get("account_id") or None
    actor_id = claims.get("actor_id")
    return Principal(
        client_id=client_id,
        user_id=user_id,
        account_id=account_id,
        session_id=claims.get("session_id"),
        signed_in=account_id is not None,
        scopes=frozenset(claims.get("scopes") or ()),
        resource=request["url"],
        token_type=SCHEME,
        actor=Actor(id=actor_id, account_id=account_id) if actor_id else None,
    )


def prepare(request: RequestInfo) -> Prepared | None:
    """The fake verifier's :class:`~poppy_django.verifier.principal.Prepare`: it never
    blocks, and has no proof to spend."""
    try:
        principal = verify(request)
    except AuthRefusal:
        return None
    return Prepared(principal, _nothing_to_spend)


async def _nothing_to_spend() -> bool:
    return True


verify.prepare = prepare  # type: ignore[attr-defined]  # the verifier's Prepare
