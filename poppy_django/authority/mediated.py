"""Mediated Sign-In (Poppy draft 0.2 §4.7): the agent relays the fields the User typed.

On when ``POPPY_AUTHORITY["MEDIATED_FIELDS"]`` declares the fields (``auth.mediated`` in
``poppy.json``). The personal agent posts ``{"scope", "credentials": {field: value}}`` with
its Session's DPoP token to ``/poppy/sign-in``; the company's check
(``MEDIATED_CHECK``, default :func:`django_check`: Django's ``authenticate()``) answers
:class:`Authenticated` (the Session is signed in: ``complete`` with a Session Token and an
Account Token), :class:`CodeRequired` (the company sent a one-time code: ``code_required``;
the same Session continues at ``/poppy/sign-in/{sign_in_id}`` with ``{"code"}``), or None
(``failed``). A sign-in the check let in is asked for a code too when it looks unusual
(PAP-4.7-04: ``MEDIATED_CODE_WHEN``, sent by ``MEDIATED_SEND_CODE``; the defaults, in
:mod:`poppy_django.authority.mediated_codes`, e-mail one after failed attempts on the account
or at a client's first sign-in to it).

Credentials are never logged, stored, echoed or put in an error: the body is read here and
dropped, every refusal has a fixed description, the functions that hold them are marked
``sensitive_variables`` for Django's error reports, and only a one-time code's SHA-256 hash
is kept. Attempts are counted first (:mod:`poppy_django.authority.attempts`): past one
caller's own limit (its Session, its User, the account as this client tries it) the answer
is ``429 rate_limited`` with ``Retry-After`` and the credentials are not even checked; past a
limit many share (the account across clients, the client, the address) a right password
must prove a one-time code and a wrong one is slowed down, so no one can lock others out.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
import logging
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any, Protocol

from authlib.oauth2 import OAuth2Error
from django.contrib.auth import authenticate
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction
from django.http import HttpRequest, JsonResponse
from django.urls import NoReverseMatch
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.debug import sensitive_variables

from poppy_django.api.rest_framework import request_info
from poppy_django.authority import attempts, grants, metadata
from poppy_django.authority.account_state import Approval
from poppy_django.authority.conf import authority_settings
from poppy_django.authority.errors import AccountMismatchError, no_store, oauth_error_response
from poppy_django.authority.models import Grant, MediatedSignIn, Session
from poppy_django.authority.tokens import issue_session_token
from poppy_django.conf import poppy_settings
from poppy_django.errors import error_response
from poppy_django.store import windows
from poppy_django.verifier import Authenticate, AuthRefusal, Principal

logger = logging.getLogger("poppy_django.authority")

MAX_BODY_BYTES = 16 * 1024
#: What a sign-in id this server made looks like ("msi_" and URL-safe base64).
_SIGN_IN_ID = re.compile(r"msi_[A-Za-z0-9_-]{1,64}")
MAX_VALUE_LENGTH = 1024
#: The prefix of the counters of the account an attempt names (its non-secret fields): as
#: this client tries it (locks out), and across every client (shared: a step up).
_ACCOUNT_COUNTER = "mediated:account"
_ACCOUNT_BY_CLIENT = _ACCOUNT_COUNTER + ":client:"
_ACCOUNT_ANYWHERE = _ACCOUNT_COUNTER + ":any:"
DEFAULT_FIELDS = [
    {"name": "username", "label": "Username", "secret": False},
    {"name": "password", "label": "Password", "secret": True},
]


@dataclass(frozen=True)
class Authenticated:
    """The credentials are right: the Session signs in to ``account_id``. ``user``: the
    Django user they are (the sign-in is then bound to its state: it ends when that user is
    deactivated or its password changes, by any path); None for accounts of the check's own."""

    account_id: str
    user: Any = dataclasses.field(default=None, compare=False, repr=False)


@dataclass(frozen=True, repr=False)
class CodeRequired:
    """The credentials are right and the company sent ``code`` (kept here only as a hash)
    to the User; ``sent_to`` is where, as the company masks it (``"j***@example.com"``)."""

    account_id: str
    code: str
    sent_to: str = "your device"
    #: The Django user the credentials are, as :attr:`Authenticated.user`.
    user: Any = dataclasses.field(default=None, compare=False)

    def __repr__(self) -> str:  # never the code
        return f"CodeRequired(account_id={self.account_id!r}, sent_to={self.sent_to!r})"


class MediatedRefused(Exception):
    """A request refused before or instead of checking credentials: a JSON error."""

    def __init__(self, error: str, description: str, retry_after: int | None = None) -> None:
        super().__init__(description)
        self.error, self.description = error, description
        self.retry_after = retry_after

    def response(self) -> JsonResponse:
        headers = {"Retry-After": str(self.retry_after)} if self.retry_after else None
        return no_store(error_response(self.error, self.description, headers=headers))


def fields() -> list[dict[str, Any]] | None:
    """The declared fields (``MEDIATED_FIELDS``), or None: Mediated Sign-In is off."""
    declared = authority_settings().MEDIATED_FIELDS
    if not declared:
        return None
    checked = []
    for field in declared:
        if not isinstance(field, Mapping) or not isinstance(field.get("name"), str):
            raise ImproperlyConfigured(
                'POPPY_AUTHORITY["MEDIATED_FIELDS"] lists {"name", "label", "secret"} objects.'
            )
        checked.append(
            {
                "name": field["name"],
                "label": str(field.get("label") or field["name"]),
                "secret": bool(field.get("secret", False)),
            }
        )
    return checked


def discovery_entry(request: HttpRequest | None) -> dict[str, Any] | None:
    """``auth.mediated`` of poppy.json when Mediated Sign-In is on."""
    declared = fields()
    if declared is None:
        return None
    try:
        endpoint = metadata.endpoint(request, "mediated")
    except NoReverseMatch:  # the authority's URLs are not included: nothing to announce
        return None
    return {"endpoint": endpoint, "fields": declared, "scopes": list(metadata.scopes())}


@sensitive_variables()
class MediatedCheck(Protocol):
    """``POPPY_AUTHORITY["MEDIATED_CHECK"]``: the relayed credentials checked once; None
    when they are wrong."""

    def __call__(
        self, request: HttpRequest, credentials: Mapping[str, str], /
    ) -> Authenticated | CodeRequired | None: ...


class CodeWhen(Protocol):
    """``POPPY_AUTHORITY["MEDIATED_CODE_WHEN"]``: whether a sign-in the check let in must
    also prove a one-time code (``earlier_failures``: on the account, in the window)."""

    def __call__(
        self, request: HttpRequest, session: Session, account_id: str, /, *, earlier_failures: int
    ) -> bool: ...


class SendCode(Protocol):
    """``POPPY_AUTHORITY["MEDIATED_SEND_CODE"]``: send ``code`` to the account's User; where
    it went, masked (``"j***@example.com"``), or None when it could not be sent."""

    def __call__(self, request: HttpRequest, account_id: str, code: str, /) -> str | None: ...


def django_check(request: HttpRequest, credentials: Mapping[str, str]) -> Authenticated | None:
    """The default check: Django's ``authenticate()`` with ``username`` and ``password``."""
    user = authenticate(
        request, username=credentials.get("username"), password=credentials.get("password")
    )
    if user is None or not user.is_active:
        return None
    return Authenticated(grants.account_id_of(user), user)


def _caller(request: HttpRequest) -> tuple[Principal, Session]:
    """The verified caller and its Session at this authority (before the body is read)."""
    verifier: Authenticate | None = poppy_settings.AUTHENTICATE
    if verifier is None:
        raise MediatedRefused("not_implemented", "No token verifier is configured.")
    principal = verifier(request_info(request))
    if isinstance(principal, AuthRefusal):
        raise principal
    session = (
        Session.objects.select_related("client")
        .filter(
            session_id=principal.session_id or "",
            client__client_id=principal.client_id,
            user_id=principal.user_id,
            ended_at=None,
        )
        .first()
    )
    if session is None or not session.active:
        raise MediatedRefused("invalid_session", "The Session is unknown or has ended.")
    return principal, session


def _json_body(request: HttpRequest) -> dict[str, Any]:
    if request.content_type != "application/json":
        raise MediatedRefused("invalid_request", "The body must be application/json.")
    length = request.headers.get("Content-Length", "")
    if (length.isdigit() and int(length) > MAX_BODY_BYTES) or len(request.body) > MAX_BODY_BYTES:
        raise MediatedRefused("request_too_large", "The body is too large.")
    try:
        body = json.loads(request.body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise MediatedRefused("invalid_request", "The body is not JSON.") from None
    if not isinstance(body, dict):
        raise MediatedRefused("invalid_request", "The body is not a JSON object.")
    return body


@sensitive_variables()
def _usable(value: Any) -> bool:
    """A non-empty text of bounded length that a database and a hash can take (no NUL, no
    lone surrogate): anything else is refused before a check sees it."""
    if not isinstance(value, str) or not 0 < len(value) <= MAX_VALUE_LENGTH or "\x00" in value:
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


@sensitive_variables()
def _credentials(body: dict[str, Any], declared: list[dict[str, Any]]) -> dict[str, str]:
    given = body.get("credentials")
    names = {field["name"] for field in declared}
    if (
        not isinstance(given, dict)
        or set(given) != names
        or not all(_usable(v) for v in given.values())
    ):
        raise MediatedRefused(
            "invalid_request", "credentials must hold exactly the declared fields, none empty."
        )
    return dict(given)


def _scope(body: dict[str, Any]) -> str:
    requested = body.get("scope")
    wanted = list(dict.fromkeys(requested.split())) if isinstance(requested, str) else []
    if not wanted or not set(wanted) <= set(metadata.scopes()):
        # Missing or unknown scopes are refused, never narrowed.
        raise MediatedRefused("invalid_scope", "The scope is missing or not offered here.")
    return " ".join(wanted)


def _window() -> float:
    return float(authority_settings().MEDIATED_WINDOW_SECONDS)


def _alias() -> str:
    return str(authority_settings().REPLAY_CACHE)


def _rate_limited(seconds: int) -> MediatedRefused:
    return MediatedRefused(
        "rate_limited", "Too many failed sign-in attempts; retry later.", retry_after=seconds
    )


def _refuse_if_locked(keys: list[str]) -> None:
    limit = int(authority_settings().MEDIATED_MAX_FAILURES)
    locked = [key for key in keys if windows.current(key, alias=_alias()) >= limit]
    if locked:
        raise _rate_limited(
            max(windows.retry_after(k, seconds=_window(), alias=_alias()) for k in locked)
        )


@sensitive_variables()
def _counters(
    request: HttpRequest, session: Session, credentials: Mapping[str, str], declared: Any
) -> list[attempts.Counter]:
    """What an attempt counts against. Locking out (one caller's own): the Session, the
    pairwise User, and the named account as this client tries it (cleared when it signs in).
    Shared, past whose limits the attempt steps up instead: the named account across every
    client, the client and the address (the last two count failures only). No client can
    lock a User out of the other agents: its failures lock the account for itself alone."""
    options = authority_settings()
    limit = int(options.MEDIATED_MAX_FAILURES)
    client_id = session.client.client_id
    counters = [
        attempts.Counter(f"mediated:session:{session.session_id}", limit),
        attempts.Counter(f"mediated:user:{client_id}:{session.user_id}", limit),
    ]
    named = [credentials[f["name"]].strip().casefold() for f in declared if not f["secret"]]
    if any(named):
        account = "\x00".join(named)
        counters.append(attempts.Counter(f"{_ACCOUNT_BY_CLIENT}{client_id}\x00{account}", limit))
        counters.append(attempts.Counter(_ACCOUNT_ANYWHERE + account, limit, locks_out=False))
    counters += [
        attempts.Counter(
            f"mediated:client:{client_id}",
            int(options.MEDIATED_CLIENT_MAX_FAILURES),
            cleared_by_success=False,
            locks_out=False,
        ),
        attempts.Counter(
            f"mediated:address:{request.META.get('REMOTE_ADDR', '')}",
            int(options.MEDIATED_ADDRESS_MAX_FAILURES),
            cleared_by_success=False,
            locks_out=False,
        ),
    ]
    return counters


def _admit(counters: list[attempts.Counter], client_id: str) -> list[str]:
    """Count the attempt first; refuse it unchecked past a locking limit or while locked
    out. The shared counters past their limits (the attempt must step up), logged."""
    try:
        doubts = attempts.admit(counters, window=_window(), alias=_alias())
    except attempts.Locked as locked:
        logger.warning(
            "Mediated Sign-In locked out (%s) for %s s: a Session of %s",
            ", ".join(_kinds(locked.counters)),
            locked.seconds,
            client_id,
        )
        raise _rate_limited(locked.seconds) from None
    if doubts:
        logger.info(
            "Mediated Sign-In steps up (%s past its limit): a Session of %s",
            ", ".join(_kinds(doubts)),
            client_id,
        )
    return doubts


def _kinds(names: Any) -> list[str]:
    """The kinds of counters named (``session``, ``account``, ``address``...), never what
    they count (an account name or an address)."""
    return sorted({name.split(":")[1] for name in names})


def _slowed_down(doubts: list[str]) -> MediatedRefused:
    """A wrong attempt past a shared limit: ``rate_limited`` until that window ends."""
    seconds = max(windows.retry_after(d, seconds=_window(), alias=_alias()) for d in doubts)
    return _rate_limited(seconds)


def _code_key(account_id: str) -> str:
    return f"mediated:code:{account_id}"


def _earlier_failures(counters: list[attempts.Counter]) -> int:
    """Failed attempts on the named account from any client earlier in this window (read
    before a success clears them; this attempt was counted by :func:`_admit`). 0 when no
    field names one."""
    named = [c.name for c in counters if c.name.startswith(_ACCOUNT_ANYWHERE)]
    return max(0, windows.current(named[0], alias=_alias()) - 1) if named else 0


def _keeping_failures(counters: list[attempts.Counter]) -> list[attempts.Counter]:
    """The counters for a success that was asked for a code: the account's count is taken
    back, not cleared, so its earlier failures stand until the window ends (sending the
    right password again does not lose the doubt that asked for the code)."""
    return [
        replace(c, cleared_by_success=False) if c.name.startswith(_ACCOUNT_COUNTER) else c
        for c in counters
    ]


@sensitive_variables("code")
def _unusual_code(
    request: HttpRequest,
    session: Session,
    outcome: Authenticated,
    counters: list[attempts.Counter],
    doubts: list[str],
) -> CodeRequired | None:
    """The default second step: a one-time code sent (``MEDIATED_SEND_CODE``) when the
    sign-in looks unusual (``MEDIATED_CODE_WHEN``); None when it does not, or when no code
    could be sent (the sign-in goes on without one, with a warning naming the client).

    Past a shared counter's limit (``doubts``: the address, the client or the account across
    clients) the code is required whatever ``MEDIATED_CODE_WHEN`` says, and a sign-in no code
    can be sent for is refused (``rate_limited``) rather than let through."""
    options = authority_settings()
    account_id = outcome.account_id
    when: CodeWhen | None = options.MEDIATED_CODE_WHEN
    send: SendCode | None = options.MEDIATED_SEND_CODE
    unusual = bool(doubts) or (
        when is not None
        and when(request, session, account_id, earlier_failures=_earlier_failures(counters))
    )
    if not unusual:
        return None
    _refuse_if_locked([_code_key(account_id)])  # before sending a code no one may enter
    code = f"{secrets.randbelow(10**6):06d}"
    sent_to = send(request, account_id, code) if send is not None else None
    if sent_to is None and doubts:
        logger.warning(
            "Mediated Sign-In refused: a one-time code was required (%s past its limit) and "
            "none could be sent: a Session of %s",
            ", ".join(_kinds(doubts)),
            session.client.client_id,
        )
        raise _slowed_down(doubts)
    if sent_to is None:
        logger.warning(
            "Mediated Sign-In looked unusual but no one-time code could be sent; signed in "
            "without one: a Session of %s",
            session.client.client_id,
        )
        return None
    return CodeRequired(account_id, code, str(sent_to), outcome.user)


def _complete(
    request: HttpRequest, session: Session, account_id: str, scope: str, approval: Approval
) -> JsonResponse:
    """Sign the Session in (a Mediated grant, bound to ``approval``) and answer its tokens,
    ``status: complete``."""
    with transaction.atomic():
        signed, account_token = grants.consented(
            session.client,
            session.session_id,
            account_id=account_id,
            scope=scope,
            method=Grant.Method.MEDIATED,
            jkt=session.jkt,
            approval=approval,
        )
    token, lifetime = issue_session_token(
        signed, issuer=metadata.issuer(), audience=metadata.token_audience(request)
    )
    body = {
        "status": "complete",
        "access_token": token,
        "token_type": "DPoP",
        "expires_in": lifetime,
        "scope": signed.scope,
        "session_id": signed.session_id,
        "signed_in": True,
        "refresh_token": account_token,
    }
    return no_store(JsonResponse(body))


def _status(status: str, **extra: Any) -> JsonResponse:
    return no_store(JsonResponse({"status": status, **extra}))


def _code_required(record: MediatedSignIn, sent_to: str | None) -> JsonResponse:
    code = {"sent_to": sent_to} if sent_to else {}
    expires = record.expires_at.isoformat().replace("+00:00", "Z")
    return _status("code_required", sign_in_id=record.sign_in_id, code=code, expires_at=expires)


def _answer(view: Any) -> Any:
    """POST only (JSON ``405`` otherwise), CSRF-exempt (a token, no cookies), errors as JSON."""

    @csrf_exempt
    def wrapped(request: HttpRequest, **kwargs: Any) -> JsonResponse:
        if fields() is None:
            return error_response("not_found")
        if request.method != "POST":
            response = error_response("method_not_allowed")
            response["Allow"] = "POST"
            return response
        try:
            answer: JsonResponse = view(request, **kwargs)
            return answer
        except AuthRefusal as refusal:
            return refusal.response()
        except MediatedRefused as refusal:
            return refusal.response()
        except OAuth2Error as error:
            return oauth_error_response(error)
        except ImproperlyConfigured as exc:
            logger.error("Mediated Sign-In cannot run: %s", exc)
            return error_response("not_implemented")

    wrapped.__name__ = wrapped.__qualname__ = view.__name__
    wrapped.__doc__ = view.__doc__
    return wrapped


@_answer
@sensitive_variables()
def mediated_view(request: HttpRequest) -> JsonResponse:
    """``POST /poppy/sign-in``: check the relayed credentials once."""
    principal, session = _caller(request)
    declared = fields() or []
    body = _json_body(request)
    credentials = _credentials(body, declared)
    scope = _scope(body)
    body.clear()
    counters = _counters(request, session, credentials, declared)
    doubts = _admit(counters, principal.client_id)
    check: MediatedCheck = authority_settings().MEDIATED_CHECK or django_check
    outcome = check(request, credentials)
    credentials.clear()
    if not isinstance(outcome, Authenticated | CodeRequired):
        logger.info("Mediated Sign-In failed for a Session of %s", principal.client_id)
        if doubts:  # past a shared limit: slow down (a right password steps up instead)
            raise _slowed_down(doubts)
        return _status("failed")
    if session.account_id not in (None, outcome.account_id):
        # The right password of another account: counted as a failure (no oracle), and told.
        logger.warning(
            "Mediated Sign-In refused: another account's credentials for a Session of %s",
            principal.client_id,
        )
        raise AccountMismatchError("The Session belongs to another account.")
    if isinstance(outcome, Authenticated):
        # Right, but perhaps unusual: then a code, as if the check had asked for one.
        asked = _unusual_code(request, session, outcome, counters, doubts)
        attempts.succeeded(_keeping_failures(counters) if asked else counters, alias=_alias())
        if asked is None:
            return _complete(request, session, outcome.account_id, scope, Approval.by(outcome.user))
        outcome = asked
    else:
        attempts.succeeded(counters, alias=_alias())
    _refuse_if_locked([_code_key(outcome.account_id)])
    record = MediatedSignIn(
        sign_in_id="msi_" + secrets.token_urlsafe(24),
        session=session,
        account_id=outcome.account_id,
        scope=scope,
        code_hash=hashlib.sha256(outcome.code.encode()).hexdigest(),
        expires_at=timezone.now()
        + timedelta(seconds=float(authority_settings().MEDIATED_CODE_SECONDS)),
    )
    record.approve(outcome.user)  # the code completes it only while the account stands
    record.save()
    return _code_required(record, outcome.sent_to)


@_answer
@sensitive_variables()
def mediated_code_view(request: HttpRequest, sign_in_id: str) -> JsonResponse:
    """``POST /poppy/sign-in/{sign_in_id}``: the one-time code, from the same Session."""
    _, session = _caller(request)
    body = _json_body(request)
    code = body.pop("code", None)
    options = authority_settings()
    if not _SIGN_IN_ID.fullmatch(sign_in_id):  # never a query with what no id can be (NUL)
        raise MediatedRefused("sign_in_not_found", "No such sign-in in this Session.")
    with transaction.atomic():
        record = (
            MediatedSignIn.objects.select_for_update()
            .filter(sign_in_id=sign_in_id, session=session)
            .first()
        )
        if record is None:
            # Unknown, or another Session's: one answer for both.
            raise MediatedRefused("sign_in_not_found", "No such sign-in in this Session.")
        if record.status != MediatedSignIn.Status.CODE_REQUIRED:
            return _status(record.status)
        if record.expires_at <= timezone.now():
            record.status = MediatedSignIn.Status.EXPIRED
            record.save(update_fields=["status"])
            return _status(record.status)
        if not record.approval_stands():  # the account changed since the right password
            record.status = MediatedSignIn.Status.FAILED
            record.save(update_fields=["status"])
            return _status(record.status)
        code_key = _code_key(record.account_id)
        limit = int(options.MEDIATED_MAX_FAILURES)
        right = _usable(code) and hmac.compare_digest(
            hashlib.sha256(str(code).encode()).hexdigest(), record.code_hash
        )
        if not right or windows.current(code_key, alias=_alias()) >= limit:
            windows.count(code_key, seconds=_window(), alias=_alias())
            record.attempts += 1
            if record.attempts >= int(options.MEDIATED_CODE_ATTEMPTS) or (
                windows.current(code_key, alias=_alias()) >= limit
            ):
                record.status = MediatedSignIn.Status.FAILED
            record.save(update_fields=["attempts", "status"])
            if record.status == MediatedSignIn.Status.FAILED:
                return _status(record.status)
            return _code_required(record, None)
        record.status = MediatedSignIn.Status.COMPLETE
        record.save(update_fields=["status"])
    windows.clear(code_key, alias=_alias())
    windows.clear(f"mediated:session:{session.session_id}", alias=_alias())
    return _complete(request, session, record.account_id, record.scope, record.approval)
