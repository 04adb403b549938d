"""Browser sessions (Poppy draft 0.2 §5): a signed assertion becomes a Django session.

The personal agent's own browser posts ``assertion`` (a form field, never in a URL) to
``POST /poppy/browser-session``. The assertion is a JWT of ``typ`` ``poppy-browser+jwt``
signed with a key of the client's published JWKS, bound to one Session: ``iss`` the
client_id, ``sub`` the pairwise User, ``aud`` this endpoint's exact URL, ``session_id``,
``return_to``, ``exp`` at most 60 seconds after ``iat``, and a ``jti`` used once.

A valid one gives the browser a fresh Django session (the old one is flushed: no fixation)
that carries the Session it joined, and nothing else: the browser is **not** logged in to
Django. :mod:`poppy_django.authority.website` reads the Session's current sign-in state and
scopes on every request, and only views that opt in (``poppy_scope_required``) see its
account's user; everywhere else (the authority's consent, device and connection pages, the
admin, the desk, the company's own ``login_required`` pages) the browser is a visitor. The
answer is ``303`` to ``return_to``, which must be an ``https`` URL
on an allowed host. Anything else is ``400`` with a JSON error, no cookie set, nothing
changed; the ``jti`` is spent only by an assertion that is accepted.
"""

from __future__ import annotations

import logging
import re
import time
from typing import Any
from urllib.parse import urlsplit

import jwt
from authlib.oauth2 import OAuth2Error
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.middleware.csrf import rotate_token
from django.urls import NoReverseMatch
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_exempt

from poppy_django.authority import metadata
from poppy_django.authority.assertions import ALGORITHMS
from poppy_django.authority.clients import client_for, client_key
from poppy_django.authority.conf import authority_settings
from poppy_django.authority.models import Client, Session
from poppy_django.authority.website import STATE_KEY, state_of, user_for_account
from poppy_django.errors import error_response
from poppy_django.verifier import replay

logger = logging.getLogger("poppy_django.authority")

ASSERTION_TYPE = "poppy-browser+jwt"
MAX_LIFETIME_SECONDS = 60
MAX_ASSERTION_LENGTH = 8192
_ID = re.compile(r"[A-Za-z0-9_-]{1,256}")
_JTI = re.compile(r"[A-Za-z0-9_-]{16,256}")
#: Anything a browser might read as a path separator, whitespace or a control character.
_UNSAFE = re.compile(r"[\\\s\x00-\x1f\x7f]")


class BrowserRefused(Exception):
    """The assertion (or what it asks for) is refused: ``error`` and a fixed description."""

    def __init__(self, error: str, description: str) -> None:
        super().__init__(description)
        self.error = error
        self.description = description


def _invalid(what: str) -> BrowserRefused:
    return BrowserRefused(
        "invalid_browser_assertion", f"The browser assertion's {what} is not valid."
    )


def endpoint_url(request: HttpRequest | None) -> str:
    """The browser session endpoint's public URL: what ``aud`` must name exactly."""
    return metadata.endpoint(request, "browser-session")


def discovery_entry(request: HttpRequest | None) -> dict[str, Any] | None:
    """``web`` of poppy.json when browser sessions are on."""
    if not authority_settings().BROWSER_SESSIONS:
        return None
    try:
        return {"browser_session_endpoint": endpoint_url(request)}
    except NoReverseMatch:  # the authority's URLs are not included: nothing to announce
        return None


def return_hosts(request: HttpRequest | None) -> list[str]:
    """The hosts ``return_to`` may name (each with its subdomains)."""
    configured = authority_settings().BROWSER_RETURN_HOSTS
    if configured:
        return [str(host).lower().rstrip(".") for host in configured]
    hosts = metadata.domains(request)
    own = urlsplit(metadata.origin(request)).hostname
    if own and own.lower() not in hosts:
        hosts.append(own.lower())
    return hosts


def allowed_return_to(url: Any, hosts: list[str], origin_port: int | None = None) -> str:
    """``url`` if it is an absolute https URL on one of ``hosts`` (or a subdomain), on the
    default port or the company's own."""
    refused = BrowserRefused("invalid_return_to", "return_to is not a page of this company.")
    if not isinstance(url, str) or not url or len(url) > 2048 or _UNSAFE.search(url):
        raise refused
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise refused from None
    host = (parts.hostname or "").lower()
    if (
        parts.scheme != "https"
        or not host
        or "@" in parts.netloc
        or port not in (None, 443, origin_port)
        or not any(host == allowed or host.endswith("." + allowed) for allowed in hosts)
    ):
        raise refused
    # Django's own check as well: what a browser would make of the URL, the same host.
    if not url_has_allowed_host_and_scheme(url, allowed_hosts={parts.netloc}, require_https=True):
        raise refused
    return url


def _claims(token: str, client: Client, alg: str, kid: Any) -> dict[str, Any]:
    key = client_key(client, kid, alg)
    if key is None:
        raise _invalid("signing key")
    try:
        claims: dict[str, Any] = jwt.decode(
            token,
            key,
            algorithms=[alg],
            options={
                "verify_aud": False,
                "verify_exp": False,
                "verify_iat": False,
                "verify_nbf": False,
            },
        )
    except jwt.InvalidTokenError:
        raise _invalid("signature") from None
    return claims


def _check_times(claims: dict[str, Any], now: float) -> int:
    leeway = float(authority_settings().LEEWAY_SECONDS)
    iat, exp = claims.get("iat"), claims.get("exp")
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (iat, exp)):
        raise _invalid("lifetime")
    assert isinstance(iat, int) and isinstance(exp, int)
    if not 0 < exp - iat <= MAX_LIFETIME_SECONDS:
        raise _invalid("lifetime")
    if iat > now + leeway or exp <= now:
        raise _invalid("lifetime")
    return exp


def verify_assertion(
    token: Any, request: HttpRequest, *, now: float | None = None
) -> tuple[Session, str, str, int]:
    """The Session, ``return_to``, ``jti`` and ``exp`` of a valid browser assertion.

    Raises :class:`BrowserRefused`. The ``jti`` is checked, not spent: the caller spends it
    once everything else passed.
    """
    now = time.time() if now is None else now
    if not isinstance(token, str) or not token or len(token) > MAX_ASSERTION_LENGTH:
        raise _invalid("form")
    try:
        header = jwt.get_unverified_header(token)
        unverified = jwt.decode(token, options={"verify_signature": False})
    except jwt.InvalidTokenError:
        raise _invalid("form") from None
    alg = header.get("alg")
    # Exactly this type: a Session assertion (typ "JWT") is never a browser assertion.
    if header.get("typ") != ASSERTION_TYPE or alg not in ALGORITHMS:
        raise _invalid("type")
    issuer = unverified.get("iss")
    if not isinstance(issuer, str) or _UNSAFE.search(issuer):
        raise _invalid("client")
    try:
        client = client_for(issuer)
    except OAuth2Error:
        raise _invalid("client") from None
    claims = _claims(token, client, str(alg), header.get("kid"))
    if claims.get("iss") != client.client_id or claims.get("aud") != endpoint_url(request):
        raise _invalid("audience")
    user_id, session_id, jti = claims.get("sub"), claims.get("session_id"), claims.get("jti")
    if not (isinstance(user_id, str) and _ID.fullmatch(user_id)):
        raise _invalid("subject")
    if not (isinstance(session_id, str) and _ID.fullmatch(session_id)):
        raise _invalid("session_id")
    if not (isinstance(jti, str) and _JTI.fullmatch(jti)):
        raise _invalid("jti")
    exp = _check_times(claims, now)
    return_to = allowed_return_to(
        claims.get("return_to"), return_hosts(request), urlsplit(metadata.origin(request)).port
    )
    session = (
        Session.objects.select_related("client")
        .filter(session_id=session_id, client=client, user_id=user_id, ended_at=None)
        .first()
    )
    if session is None or not session.active:
        raise BrowserRefused("invalid_session", "The Session is unknown or has ended.")
    return session, return_to, jti, exp


def _refused(refusal: BrowserRefused) -> JsonResponse:
    response = error_response(refusal.error, refusal.description)
    response["Cache-Control"] = "no-store"
    return response


def _join(request: HttpRequest, session: Session) -> None:
    """A fresh Django session for this browser that stands for ``session`` (no login)."""
    if session.signed_in:
        user = user_for_account(session.account_id or "")
        if user is None or not getattr(user, "is_active", False):
            raise BrowserRefused("invalid_session", "The Session's account has no user here.")
    request.session.flush()  # whatever this browser was before: a new key, nothing kept
    rotate_token(request)  # and a new CSRF secret, as a login would give
    request.session[STATE_KEY] = state_of(session)
    # A cookie without a lifetime of its own: it lives as long as the Session lets it.
    request.session.set_expiry(0)


@csrf_exempt
@never_cache
def browser_session_view(request: HttpRequest) -> HttpResponse:
    """``POST`` a browser assertion: ``303`` to ``return_to`` in the Session, else ``400``."""
    if not authority_settings().BROWSER_SESSIONS:
        return error_response("not_found")
    if request.method != "POST":
        response = error_response("method_not_allowed")
        response["Allow"] = "POST"
        return response
    if request.content_type != "application/x-www-form-urlencoded":
        return _refused(BrowserRefused("invalid_request", "Post the assertion as a form."))
    try:
        session, return_to, jti, exp = verify_assertion(request.POST.get("assertion"), request)
        if not replay.first_use(
            f"browser:{session.client.client_id}",
            jti,
            ttl=max(1.0, exp - time.time()) + float(authority_settings().LEEWAY_SECONDS),
            alias=str(authority_settings().REPLAY_CACHE),
        ):
            raise _invalid("jti (already used)")
        _join(request, session)
    except BrowserRefused as refusal:
        logger.info("Browser assertion refused: %s", refusal.description)
        return _refused(refusal)
    redirect = HttpResponseRedirect(return_to)
    redirect.status_code = 303  # See Other: the browser GETs return_to
    return redirect
