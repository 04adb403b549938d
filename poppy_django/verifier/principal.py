"""The verifier contract: ``verify({method, url, headers}) -> Principal`` or a refusal.

``POPPY["AUTHENTICATE"]`` names the verifier; it is read per request, so tests and
deployments can swap it. A verifier may return an :class:`AuthRefusal` or raise one.

A verifier may also offer a ``prepare`` attribute (:class:`Prepare`): the same checks with
nothing that blocks, for a read answered on the event loop (``poppy_django.store.tail``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypedDict

from django.http import JsonResponse

from poppy_django.errors import STATUS_OF, PoppyError, error_response


class RequestInfo(TypedDict):
    """What a verifier sees: the public URL (what a DPoP ``htu`` names) and raw headers."""

    method: str
    url: str
    #: Header names are lower-case.
    headers: dict[str, str]


@dataclass(frozen=True)
class Actor:
    """Who a turn runs as. ``account_id`` is set only for an account actor."""

    id: str
    account_id: str | None = None
    extra: dict[str, Any] = field(default_factory=dict, compare=False)


@dataclass(frozen=True)
class Principal:
    """A verified caller: a personal agent acting for one (pairwise) User."""

    client_id: str
    user_id: str
    account_id: str | None = None
    session_id: str | None = None
    signed_in: bool = False
    scopes: frozenset[str] = frozenset()
    resource: str | None = None
    token_type: str = "DPoP"
    actor: Actor | None = None

    def to_dict(self) -> dict[str, Any]:
        """What a turn needs to know later, stored with the message (no token, no proof)."""
        return {
            "client_id": self.client_id,
            "user_id": self.user_id,
            "account_id": self.account_id,
            "session_id": self.session_id,
            "signed_in": self.signed_in,
            "scopes": sorted(self.scopes),
            "actor": (
                {
                    "id": self.actor.id,
                    "account_id": self.actor.account_id,
                    "extra": self.actor.extra,
                }
                if self.actor
                else None
            ),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Principal:
        actor = data.get("actor")
        return cls(
            client_id=data["client_id"],
            user_id=data["user_id"],
            account_id=data.get("account_id"),
            session_id=data.get("session_id"),
            signed_in=bool(data.get("signed_in")),
            scopes=frozenset(data.get("scopes") or ()),
            actor=Actor(actor["id"], actor.get("account_id"), actor.get("extra") or {})
            if actor
            else None,
        )

    def __post_init__(self) -> None:
        if self.signed_in and not self.account_id:
            raise ValueError("A signed-in principal needs an account_id.")
        if not self.signed_in and self.account_id:
            raise ValueError("A signed-out principal has no account_id.")


class AuthRefusal(PoppyError):
    """A refusal of the caller's credentials: its wire error and status (the one table in
    :data:`poppy_django.errors.STATUS_OF`), ``WWW-Authenticate``, extra headers such as
    ``DPoP-Nonce``, and ``Cache-Control: no-store``.

    A :class:`~poppy_django.errors.PoppyError` like every other refusal, so whatever answers
    those answers this one too.
    """

    def __init__(
        self,
        error: str,
        description: str | None = None,
        *,
        status: int | None = None,
        www_authenticate: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        if error not in STATUS_OF and status is None:
            raise ValueError(f"Unknown refusal {error!r}: give its status.")
        super().__init__(error, description, status=status, headers=dict(headers or {}))
        self.www_authenticate = www_authenticate or f'DPoP error="{error}"'

    @property
    def error(self) -> str:
        """The wire error code (the verifier contract's name for ``code``)."""
        return self.code

    def response(self) -> JsonResponse:
        response = error_response(
            self.code,
            self.description,
            status=self.status,
            extra=self.extra,
            headers={"WWW-Authenticate": self.www_authenticate, **self.headers},
        )
        response["Cache-Control"] = "no-store"
        return response


class Authenticate(Protocol):
    """``POPPY["AUTHENTICATE"]``: the verifier. The caller of this request, or a refusal
    (returned or raised)."""

    def __call__(self, request: RequestInfo, /) -> Principal | AuthRefusal: ...


@dataclass(frozen=True)
class Prepared:
    """A request whose every check passed without blocking but the proof's one use, which
    ``spend`` (awaited on the event loop) records: the request is the ``principal``'s once
    it answers True."""

    principal: Principal
    spend: Callable[[], Awaitable[bool]]


class Prepare(Protocol):
    """A verifier's ``prepare``: :class:`Prepared` for a request it accepts without a blocking
    call; None for any other (refused, or needing a key, a cache or the session's seam): the
    caller then asks the verifier itself, in a thread, which answers as it always does."""

    def __call__(self, request: RequestInfo, /) -> Prepared | None: ...


class SessionStatus(Protocol):
    """``POPPY["SESSION_STATUS"]``: whether the caller's session is still on. True (active),
    False (ended: revoked, expired) or ``"signed_out"`` (the User signed out of it)."""

    def __call__(self, principal: Principal, /) -> bool | Literal["signed_out"]: ...


class ActorFor(Protocol):
    """``POPPY["ACTOR_FOR"]``: whom a turn runs as for a caller without a token ``act``,
    given the default actor (None: the default)."""

    def __call__(self, principal: Principal, default_actor: Actor, /) -> Actor | None: ...
