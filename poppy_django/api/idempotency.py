"""``Idempotency-Key`` on a company API's writes: a retried write is performed once.

Personal agents send ``Idempotency-Key`` on every write and retry a write whose answer they
did not get. :class:`IdempotentWrites`, mixed into a DRF ``APIView``, keeps the first
answer of each (caller, key) for :attr:`~IdempotentWrites.idempotency_seconds` (a day) in
the shared cache: the same request again is answered with it (``Idempotent-Replayed:
true``) and the view does not run; the same key with another method, path or body is ``409
idempotency_key_conflict``, as is a repeat while the first is still running. The caller is
the verified personal agent's client and pairwise User (``request.auth``), or the Django
user. As Stripe's keys are:

- **bound to the sign-in that made them.** The record keeps the first request's account
  (none when signed out) and scopes, and a repeat is replayed only to the same account with
  at least those scopes: after a sign-out, with a narrower token, or from a Session of the
  same User signed in to another account, it is ``409`` and the first answer is never shown
  (the view's own scope checks, which run inside it, never ran for that caller). DRF's
  authentication, permissions and throttles run before the key is looked at.
- **bounded per caller.** At most :attr:`~IdempotentWrites.idempotency_keys_per_caller`
  new keys per caller per :attr:`~IdempotentWrites.idempotency_seconds`, then ``429
  too_many_requests`` with ``Retry-After``: the records live in the Redis the broker uses.
- **released when the write did nothing for good.** An answer that performed nothing (a
  ``401``, ``403``, ``408``, ``429`` or ``5xx``, or any answer that is not a DRF response) and
  an unhandled exception delete the record, so a retry runs the view again; a record left
  ``running`` by a process that died ends after
  :attr:`~IdempotentWrites.idempotency_running_seconds`.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from rest_framework.request import Request
from rest_framework.response import Response

from poppy_django.api.throttling import too_many
from poppy_django.api.wire_errors import PoppyAPIException
from poppy_django.errors import PoppyError
from poppy_django.process_cache import shared_cache
from poppy_django.store import windows

WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})
#: A key as RFC draft-ietf-httpapi-idempotency-key-header has it (a string), bounded.
_KEY = re.compile(r"[\x21-\x7e]{1,255}")
_PREFIX = "poppy:idempotency:"
#: Answers that performed nothing the caller may not retry into doing: never kept.
_NOT_KEPT = frozenset({401, 403, 408, 429})


class _Replay(Exception):
    """The first answer to this (caller, key): sent again instead of running the view."""

    def __init__(self, stored: dict[str, Any]) -> None:
        super().__init__("replay")
        self.stored = stored


def _caller(request: Request) -> str:
    principal = getattr(request, "auth", None)
    client_id, user_id = getattr(principal, "client_id", None), getattr(principal, "user_id", None)
    if client_id and user_id:
        return f"agent\x00{client_id}\x00{user_id}"
    return f"user\x00{getattr(request.user, 'pk', None)}"


def _sign_in(request: Request) -> dict[str, Any]:
    """What the caller is signed in as: the account (None: signed out) and its scopes."""
    principal = getattr(request, "auth", None)
    signed_in = bool(getattr(principal, "signed_in", False))
    return {
        "account": getattr(principal, "account_id", None) if signed_in else None,
        "scopes": sorted(getattr(principal, "scopes", ())) if signed_in else [],
    }


def _same_sign_in(first: dict[str, Any], now: dict[str, Any]) -> bool:
    """Whether a repeat may see the first answer: the same account, at least its scopes."""
    return first["account"] == now["account"] and set(first["scopes"]) <= set(now["scopes"])


def _conflict(description: str) -> PoppyAPIException:
    return PoppyAPIException(PoppyError("idempotency_key_conflict", description))


class IdempotentWrites:
    """A DRF ``APIView`` mixin (list it before ``APIView``): writes honour
    ``Idempotency-Key``."""

    #: How long a first answer is kept (and how long the per-caller count runs).
    idempotency_seconds = 86400
    #: New keys one caller may use per ``idempotency_seconds``.
    idempotency_keys_per_caller = 100
    #: How long a write may stay ``running`` before its key is presumed abandoned.
    idempotency_running_seconds = 300
    _idempotency: tuple[str, dict[str, Any]] | None = None

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)  # type: ignore[misc]
        self._idempotency = None
        key = request.headers.get("Idempotency-Key")
        if key is None or request.method not in WRITES:
            return
        if not _KEY.fullmatch(key):
            raise PoppyAPIException(
                PoppyError("invalid_request", "Idempotency-Key is 1 to 255 visible characters.")
            )
        digest = hashlib.sha256
        caller = _caller(request)
        name = _PREFIX + digest(f"{caller}\x00{key}".encode()).hexdigest()
        fingerprint = digest(
            request.method.encode() + b"\x00" + request.path.encode() + b"\x00" + request.body
        ).hexdigest()
        cache = shared_cache("default")
        running = {"fingerprint": fingerprint, "state": "running", **_sign_in(request)}
        if cache.add(name, running, timeout=self.idempotency_running_seconds):
            self._count_new_key(caller, name)
            self._idempotency = (name, running)
            return
        stored = cache.get(name) or running
        if not _same_sign_in(stored, running):
            raise _conflict("This Idempotency-Key was used by another sign-in.")
        if stored["fingerprint"] != fingerprint:
            raise _conflict("This Idempotency-Key was used for another request.")
        if stored["state"] == "running":
            raise _conflict("The first request with this Idempotency-Key is still running.")
        raise _Replay(stored)

    def _count_new_key(self, caller: str, name: str) -> None:
        """Count a caller's new key; past the bound, take it back and refuse (429)."""
        counter = f"idempotency-keys:{caller}"
        seconds = self.idempotency_seconds
        if windows.count(counter, seconds=seconds) <= self.idempotency_keys_per_caller:
            return
        shared_cache("default").delete(name)
        raise PoppyAPIException(
            too_many(
                f"At most {self.idempotency_keys_per_caller} Idempotency-Keys per caller "
                f"in {seconds} s.",
                windows.retry_after(counter, seconds=seconds),
            )
        )

    def _release(self) -> None:
        """Forget the running write's key: a retry runs the view again."""
        if self._idempotency is not None:
            shared_cache("default").delete(self._idempotency[0])
            self._idempotency = None

    def handle_exception(self, exc: Exception) -> Response:
        if isinstance(exc, _Replay):
            return Response(
                exc.stored["data"],
                status=exc.stored["status"],
                headers={"Idempotent-Replayed": "true"},
            )
        try:
            return super().handle_exception(exc)  # type: ignore[misc]
        except BaseException:  # unhandled: the answer is a 500, and nothing was kept
            self._release()
            raise

    def finalize_response(self, request: Request, response: Any, *args: Any, **kwargs: Any) -> Any:
        response = super().finalize_response(request, response, *args, **kwargs)  # type: ignore[misc]
        if self._idempotency is None:
            return response
        status = response.status_code
        if status >= 500 or status in _NOT_KEPT or not hasattr(response, "data"):
            self._release()  # it performed nothing: a retry may succeed
            return response
        name, running = self._idempotency
        self._idempotency = None
        done = {**running, "state": "done", "status": status, "data": response.data}
        shared_cache("default").set(name, done, timeout=self.idempotency_seconds)
        return response
