"""The company's website in a personal agent's browser session: ``request.poppy``.

:mod:`poppy_django.authority.browser` logs the agent's browser in to a Django session that
carries its Poppy Session (this module's :data:`STATE_KEY`). Add
:class:`BrowserSessionMiddleware` after Django's ``AuthenticationMiddleware``: on every
request it looks the Session up again, so a sign-out, a revoked sign-in, an ended Session or
a blocked client ends that browser session at its next request (the Django session is
flushed: the browser is a stranger again), and it sets ``request.poppy``:

- ``None`` for every browser that did not join through a Poppy Session (people browsing,
  staff): the site's own rules apply unchanged;
- a :class:`BrowserSession` otherwise, with the Session's current ``signed_in``,
  ``account_id`` and ``scopes`` (empty while signed out: scopes count only signed in).

Company views gate what a personal agent may do with :func:`poppy_scope_required`, or read
``request.poppy`` (:func:`poppy_browser`) themselves.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import wraps
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction, sync_to_async
from django.contrib.auth import SESSION_KEY, logout
from django.http import HttpRequest, HttpResponse, HttpResponseForbidden
from django.http.response import HttpResponseBase

from poppy_django.authority.models import Session

#: Where the Django session keeps the Poppy Session it stands for.
STATE_KEY = "_poppy_browser_session"


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
    """What the Django session keeps of a Poppy Session when its browser joins."""
    return {
        "session_id": session.session_id,
        "client_id": session.client.client_id,
        "user_id": session.user_id,
        "signed_in": session.signed_in,
        "account_id": session.account_id if session.signed_in else None,
    }


def _current(state: dict[str, Any]) -> BrowserSession | None:
    """The Session behind ``state``, or None when it no longer stands as it joined."""
    session = (
        Session.objects.select_related("client")
        .filter(session_id=state.get("session_id"))
        .only("ended_at", "grant_id", "account_id", "scope", "client__status", "client__client_id")
        .first()
    )
    if session is None or not session.active or session.client.client_id != state.get("client_id"):
        return None
    signed_in = bool(state.get("signed_in"))
    if signed_in and not (session.signed_in and session.account_id == state.get("account_id")):
        return None  # signed out (or signed in again elsewhere): this browser is done
    return BrowserSession(
        session_id=session.session_id,
        client_id=session.client.client_id,
        user_id=str(state.get("user_id", "")),
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
    current = _current(state)
    if current is None:
        logout(request)  # flushes the Django session: the cookie stands for nothing now
        return
    if current.signed_in != (store.get(SESSION_KEY) is not None):
        # Someone logged in or out on the site's own pages since: no Poppy browser any more.
        del store[STATE_KEY]
        return
    request.poppy = current  # type: ignore[attr-defined]


class BrowserSessionMiddleware:
    """Sets ``request.poppy`` (place after ``AuthenticationMiddleware``); sync and async."""

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


def poppy_browser(request: HttpRequest) -> BrowserSession | None:
    """The Poppy Session this browser browses in, or None (needs the middleware)."""
    found = getattr(request, "poppy", None)
    return found if isinstance(found, BrowserSession) else None


def poppy_scope_required(
    *scopes: str,
) -> Callable[[Callable[..., HttpResponse]], Callable[..., HttpResponse]]:
    """A view a personal agent's browser may see only with ``scopes`` granted (else 403).

    Requests from browsers that did not join through a Poppy Session are not affected: the
    view's own rules (``login_required``, permissions) apply to them as always.
    """

    def decorator(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
        @wraps(view)
        def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            visit = poppy_browser(request)
            if visit is not None and not visit.has_scopes(*scopes):
                return HttpResponseForbidden(
                    "Your personal agent's session does not have the permission "
                    f"({' '.join(scopes)}) to see this page.",
                    content_type="text/plain; charset=utf-8",
                )
            return view(request, *args, **kwargs)

        return wrapped

    return decorator
