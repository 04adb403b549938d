"""The company's website in a personal agent's browser session: ``request.poppy``.

:mod:`poppy_django.authority.browser` gives the agent's browser a Django session that
carries its Poppy Session (this module's :data:`STATE_KEY`) and **no Django login**. Add
:class:`BrowserSessionMiddleware` after Django's ``AuthenticationMiddleware``: on every
request it looks the Session up again and sets ``request.poppy``:

- ``None`` for every browser that did not join through a Poppy Session (people browsing,
  staff): the site's own rules apply unchanged;
- a :class:`BrowserSession` otherwise, with the Session's sign-in state, ``account_id`` and
  ``scopes`` as they are *now* (empty while signed out): a Session that signs in after its
  browser joined is signed in at that browser's next request, one that signs out or narrows
  its scopes likewise; an ended Session or a blocked client ends the browser session (the
  Django session is flushed: the browser is a stranger again).

Least privilege, as DRF's per-view ``authentication_classes``: ``request.user`` stays the
anonymous user for a Poppy browser, so the authority's consent, device and connection pages,
the admin, the desk and the company's own ``login_required`` pages never open to it. Only a
view that opts in with :func:`poppy_scope_required` authenticates it: there, with the
scopes it names granted, ``request.user`` is the signed-in Session's account's user.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import wraps
from typing import Any, Protocol

from asgiref.sync import iscoroutinefunction, markcoroutinefunction, sync_to_async
from django.contrib.auth import SESSION_KEY, get_user_model, logout
from django.http import HttpRequest, HttpResponse, HttpResponseForbidden
from django.http.response import HttpResponseBase

from poppy_django.authority.conf import authority_settings
from poppy_django.authority.models import Session

#: Where the Django session keeps the Poppy Session it stands for.
STATE_KEY = "_poppy_browser_session"
#: The attribute :func:`poppy_scope_required` marks an opted-in view with (its scopes).
OPT_IN_ATTRIBUTE = "poppy_browser_scopes"


@dataclass(frozen=True)
class BrowserSession:
    """The Poppy Session a browser joined, as it is now."""

    session_id: str
    client_id: str
    #: The pairwise User id the personal agent chose (opaque).
    user_id: str
    signed_in: bool
    account_id: str | None
    scopes: frozenset[str]

    def has_scopes(self, *scopes: str) -> bool:
        return set(scopes) <= self.scopes


def state_of(session: Session) -> dict[str, Any]:
    """What the Django session keeps of a Poppy Session when its browser joins: which
    Session, never its sign-in state (read again on every request)."""
    return {
        "session_id": session.session_id,
        "client_id": session.client.client_id,
        "user_id": session.user_id,
    }


def _current(state: dict[str, Any]) -> BrowserSession | None:
    """The Session behind ``state`` as it is now, or None when it no longer stands."""
    session = (
        Session.objects.select_related("client", "grant")
        .filter(session_id=state.get("session_id"), user_id=state.get("user_id"))
        .only(
            "session_id",
            "user_id",
            "ended_at",
            "grant_id",
            "account_id",
            "scope",
            "client__status",
            "client__client_id",
            "grant__approved_by_id",
            "grant__account_state",
        )
        .first()
    )
    if session is None or not session.active or session.client.client_id != state.get("client_id"):
        return None
    # Signed in while its sign-in's approval stands (no bulk deactivation or new password).
    signed_in = session.grant is not None and session.grant.approval_stands()
    return BrowserSession(
        session_id=session.session_id,
        client_id=session.client.client_id,
        user_id=session.user_id,
        signed_in=signed_in,
        account_id=session.account_id if signed_in else None,
        scopes=frozenset(session.scope.split()) if signed_in else frozenset(),
    )


def apply_browser_session(request: HttpRequest) -> None:
    """Set ``request.poppy``; end a browser session whose Poppy Session no longer stands."""
    request.poppy = None  # type: ignore[attr-defined]
    store = getattr(request, "session", None)
    if store is None:
        return
    state = store.get(STATE_KEY)
    if not isinstance(state, dict):
        return
    if store.get(SESSION_KEY) is not None:
        # Someone logged in on the site's own pages since: a person's login, no Poppy browser.
        del store[STATE_KEY]
        return
    current = _current(state)
    if current is None:
        logout(request)  # flushes the Django session: the cookie stands for nothing now
        return
    request.poppy = current  # type: ignore[attr-defined]


class UserForAccount(Protocol):
    """``POPPY_AUTHORITY["USER_FOR_ACCOUNT"]``: the Django user of an account (the inverse of
    ``ACCOUNT_ID``), or None."""

    def __call__(self, account_id: str, /) -> Any: ...


def user_for_account(account_id: str) -> Any:
    """The Django user of a signed-in Session's account (``USER_FOR_ACCOUNT``), or None."""
    hook: UserForAccount | None = authority_settings().USER_FOR_ACCOUNT
    if hook is not None:
        return hook(account_id)
    model = get_user_model()
    return model._default_manager.filter(**{model.USERNAME_FIELD: account_id}).first()


def _refused(scopes: frozenset[str]) -> HttpResponseForbidden:
    return HttpResponseForbidden(
        "Your personal agent's session does not have the permission "
        f"({' '.join(sorted(scopes))}) to see this page.",
        content_type="text/plain; charset=utf-8",
    )


def authenticate_opted_in(request: HttpRequest, view: Callable[..., Any]) -> HttpResponse | None:
    """For a view that opted in: ``403`` without its scopes, else ``request.user`` is the
    signed-in Session's account's user. Every other view keeps the anonymous user."""
    visit = poppy_browser(request)
    scopes = getattr(view, OPT_IN_ATTRIBUTE, None)
    if visit is None or scopes is None:
        return None
    if not visit.has_scopes(*scopes):
        return _refused(scopes)
    if visit.signed_in:
        user = user_for_account(visit.account_id or "")
        if user is not None and getattr(user, "is_active", False):
            request.user = user

            async def auser() -> Any:
                return user

            request.auser = auser
    return None


class BrowserSessionMiddleware:
    """Sets ``request.poppy`` (place after ``AuthenticationMiddleware``) and authenticates a
    Poppy browser for the views that opt in; sync and async."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], Any]) -> None:
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> Any:
        if self.is_async:
            return self.__acall__(request)
        apply_browser_session(request)
        return self.get_response(request)

    async def __acall__(self, request: HttpRequest) -> HttpResponseBase:
        if getattr(request, "session", None) is None:
            request.poppy = None  # type: ignore[attr-defined]
        else:  # reading the session and the Session is database work
            await sync_to_async(apply_browser_session)(request)
        response: Awaitable[HttpResponseBase] = self.get_response(request)
        return await response

    def process_view(
        self,
        request: HttpRequest,
        view_func: Callable[..., Any],
        view_args: tuple[Any, ...],
        view_kwargs: dict[str, Any],
    ) -> HttpResponse | None:
        """Default deny: the account's user only for a view marked by the opt-in."""
        return authenticate_opted_in(request, view_func)


def poppy_browser(request: HttpRequest) -> BrowserSession | None:
    """The Poppy Session this browser browses in, or None (needs the middleware)."""
    found = getattr(request, "poppy", None)
    return found if isinstance(found, BrowserSession) else None


def poppy_scope_required(
    *scopes: str,
) -> Callable[[Callable[..., HttpResponse]], Callable[..., HttpResponse]]:
    """The opt-in: a personal agent's browser may see this view, as the signed-in Session's
    account's user, only with ``scopes`` granted (else ``403``).

    Requests from browsers that did not join through a Poppy Session are not affected: the
    view's own rules (``login_required``, permissions) apply to them as always. The mark
    survives decorators that use ``functools.wraps``, in either order.
    """

    def decorator(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
        @wraps(view)
        def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            visit = poppy_browser(request)
            if visit is not None and not visit.has_scopes(*scopes):
                return _refused(frozenset(scopes))
            return view(request, *args, **kwargs)

        setattr(wrapped, OPT_IN_ATTRIBUTE, frozenset(scopes))
        return wrapped

    return decorator
