"""The authority's HTTP endpoints: token, revocation and the signing keys.

Credentials are read from the form body only (a query string is ignored, never a place for
one); every answer is JSON, and the ones carrying or refusing credentials are ``no-store``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import wraps
from typing import Any

import jwt
from authlib.oauth2 import OAuth2Error
from authlib.oauth2.rfc6749 import InvalidRequestError, UnsupportedGrantTypeError
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from poppy_django.addresses import public_origin
from poppy_django.authority import device, direct, grants, metadata, sessions
from poppy_django.authority.assertions import verify_client_assertion, verify_session_assertion
from poppy_django.authority.clients import client_for, remember
from poppy_django.authority.conf import authority_settings
from poppy_django.authority.errors import InvalidSessionError, no_store, oauth_error_response
from poppy_django.authority.keys import ALGORITHM, signing_key
from poppy_django.authority.models import Client, Session
from poppy_django.authority.proofs import verify_token_request_proof
from poppy_django.authority.tokens import issue_session_token
from poppy_django.conf import poppy_settings
from poppy_django.errors import error_response
from poppy_django.verifier import resources

JWT_BEARER = metadata.JWT_BEARER
FORM_TYPE = "application/x-www-form-urlencoded"
#: What a session_id this authority issued can look like (``ses_`` and base64url).
_SESSION_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")


def _post_only(
    view: Callable[[HttpRequest], JsonResponse],
) -> Callable[[HttpRequest], JsonResponse]:
    """A JSON ``405`` with ``Allow: POST`` for any other method; no CSRF (no cookies used)."""

    @csrf_exempt
    @wraps(view)
    def wrapped(request: HttpRequest) -> JsonResponse:
        if request.method != "POST":
            response = error_response("method_not_allowed")
            response["Allow"] = "POST"
            return response
        return view(request)

    return wrapped


def _form(request: HttpRequest) -> dict[str, str]:
    if request.content_type != FORM_TYPE:
        raise InvalidRequestError("The body must be application/x-www-form-urlencoded.")
    form = {name: request.POST.get(name, "") for name in request.POST}
    if any("\x00" in text for item in form.items() for text in item):
        # No parameter of OAuth holds a NUL, and PostgreSQL could not compare one.
        raise InvalidRequestError("A form parameter holds a NUL character.")
    return form


def _authenticated_client(form: dict[str, str]) -> Client:
    """The client the form's assertion proves; stored only from here on."""
    client = client_for(form.get("client_id"))
    verify_client_assertion(form, client, metadata.issuer())
    return remember(client)


def _session_token_response(
    request: HttpRequest,
    session: Session,
    account_token: str | None = None,
    *,
    resource: str | None = None,
    bound: bool = True,
) -> JsonResponse:
    token, lifetime = issue_session_token(
        session, issuer=metadata.issuer(), audience=_audience(request, resource), bound=bound
    )
    body: dict[str, Any] = {
        "access_token": token,
        "token_type": "DPoP" if bound else "Bearer",
        "expires_in": lifetime,
        "scope": session.scope if session.signed_in else "",
        "session_id": session.session_id,
        "signed_in": session.signed_in,
    }
    if account_token is not None:
        body["refresh_token"] = account_token
    return no_store(JsonResponse(body))


class InvalidTargetError(OAuth2Error):
    """RFC 8707 §2: a ``resource`` this authority does not issue Session Tokens for."""

    error = "invalid_target"


def _audience(request: HttpRequest, resource: str | None) -> list[str]:
    """The endpoint's audience, or (``resource``, RFC 8707) exactly one other resource this
    company serves: its MCP server, whose tokens are then good there and nowhere else."""
    if not resource:
        return metadata.token_audience(request)
    if resources.serving(resource, request) is None:
        raise InvalidTargetError("Session Tokens are not issued for this resource.")
    return [resource]


def _proof_key(request: HttpRequest) -> str:
    return verify_token_request_proof(
        request.headers.get("DPoP"), public_origin(request) + request.path
    )


def _proof_key_or_bearer(request: HttpRequest, resource: str | None) -> str | None:
    """The proof's key, or None when the token is a Bearer one: for the ``resource`` of an
    MCP server without DPoP, the one place a Bearer token is issued (Poppy §4.3: the type
    is the server's), with or without a proof, good only there.

    Anything else needs a proof (``invalid_dpop_proof``), after ``invalid_target`` for a
    resource this authority serves no token for.
    """
    if not resource:
        return _proof_key(request)
    _audience(request, resource)  # invalid_target unless it is the MCP server
    served = resources.serving(resource, request)
    if served is None or served.dpop():
        return _proof_key(request)
    return None


def _session_id(form: dict[str, str]) -> str:
    session_id = form.get("session_id")
    if not session_id:
        raise InvalidRequestError("The session_id to sign in is missing.")
    if not _SESSION_ID.fullmatch(session_id):
        raise InvalidSessionError("The Session is unknown or has ended.")
    return session_id


def _jwt_bearer(request: HttpRequest, form: dict[str, str], client: Client) -> JsonResponse:
    """Start a Session (no ``session_id``) or renew one, for the assertion's User."""
    user_id = verify_session_assertion(form.get("assertion"), client, metadata.issuer())
    jkt = _proof_key_or_bearer(request, form.get("resource"))
    if form.get("session_id"):
        session = sessions.renew_session(client, user_id, jkt, _session_id(form))
    else:
        session = sessions.start_session(client, user_id, jkt)
    return _session_token_response(
        request, session, resource=form.get("resource"), bound=jkt is not None
    )


def _device_code(request: HttpRequest, form: dict[str, str], client: Client) -> JsonResponse:
    """Device Sign-In's poll: pending, or the Session signed in and an Account Token."""
    jkt = _proof_key(request)
    session, account_token = device.exchange(
        client, form.get("device_code", ""), _session_id(form), jkt
    )
    return _session_token_response(request, session, account_token)


def _refresh_token(request: HttpRequest, form: dict[str, str], client: Client) -> JsonResponse:
    """An Account Token signs a Session in (narrower scopes allowed) and is rotated."""
    jkt = _proof_key_or_bearer(request, form.get("resource"))
    session, account_token = grants.refresh(
        client, form.get("refresh_token", ""), _session_id(form), form.get("scope"), jkt
    )
    return _session_token_response(
        request, session, account_token, resource=form.get("resource"), bound=jkt is not None
    )


def _authorization_code(request: HttpRequest, form: dict[str, str], client: Client) -> JsonResponse:
    """Direct Sign-In's code (with its PKCE verifier) signs the Session in."""
    jkt = _proof_key(request)
    session, account_token = direct.exchange(client, form, _session_id(form), jkt)
    return _session_token_response(request, session, account_token)


GRANTS = {
    JWT_BEARER: _jwt_bearer,
    metadata.DEVICE_CODE: _device_code,
    "refresh_token": _refresh_token,
    "authorization_code": _authorization_code,
}


@_post_only
def device_authorization_view(request: HttpRequest) -> JsonResponse:
    """``POST`` RFC 8628 §3.1: a device code, a user code and our page's link."""
    try:
        form = _form(request)
        client = _authenticated_client(form)
        record, device_code = device.start(client, form.get("scope"))
    except OAuth2Error as error:
        return oauth_error_response(error)
    page = metadata.endpoint(request, "device-page")
    body = {
        "device_code": device_code,
        "user_code": record.user_code,
        "verification_uri": page,
        "verification_uri_complete": f"{page}?user_code={record.user_code}",
        "expires_in": int(authority_settings().DEVICE_CODE_SECONDS),
        "interval": record.interval,
    }
    return no_store(JsonResponse(body))


@_post_only
def token_view(request: HttpRequest) -> JsonResponse:
    """``POST`` the token endpoint: client authentication, then the grant."""
    try:
        form = _form(request)
        grant = GRANTS.get(form.get("grant_type", ""))
        if grant is None:
            raise UnsupportedGrantTypeError("This grant_type is not offered.")
        client = _authenticated_client(form)
        return grant(request, form, client)
    except OAuth2Error as error:
        headers = {"Retry-After": "60"} if error.status_code == 429 else None
        return oauth_error_response(error, headers)


@_post_only
def revocation_view(request: HttpRequest) -> JsonResponse:
    """``POST`` RFC 7009 revocation of this client's Account Token or Session Token.

    An Account Token: its sign-in is revoked and every Session signed in from it continues
    signed out (sign-out). A Session Token: its Session ends.

    Unknown, expired or foreign tokens are answered 200 as well (RFC 7009 §2.2): the
    answer tells nothing about a token.
    """
    try:
        form = _form(request)
        client = _authenticated_client(form)
        if not form.get("token"):
            raise InvalidRequestError("The token to revoke is missing.")
    except OAuth2Error as error:
        return oauth_error_response(error)
    if not grants.revoke_account_token(client, form["token"]):
        session_id = _own_session_id(form["token"])
        if session_id:
            sessions.end_sessions(Session.objects.filter(session_id=session_id, client=client))
    return no_store(JsonResponse({}))


def _own_session_id(token: str) -> str | None:
    """The ``sid`` of a Session Token this authority signed (expired ones included)."""
    try:
        claims = jwt.decode(
            token,
            signing_key().public_key(),
            algorithms=[ALGORITHM],
            options={"verify_aud": False, "verify_exp": False},
        )
    except jwt.InvalidTokenError:
        return None
    sid = claims.get(poppy_settings.token_options.claims["session_id"])
    return sid if isinstance(sid, str) else None
