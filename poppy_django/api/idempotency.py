"""``Idempotency-Key`` on a company API's writes: a retried write is performed once.

Personal agents send ``Idempotency-Key`` on every write and retry a write whose answer they
did not get. :class:`IdempotentWrites`, mixed into a DRF ``APIView``, keeps the first
answer of each (caller, key) for :attr:`~IdempotentWrites.idempotency_seconds` (a day) in
the shared cache: the same request again is answered with it (``Idempotent-Replayed:
true``) and the view does not run; the same key with another method, path or body is ``409
idempotency_key_conflict``, as is a repeat while the first is still running. A write that
fails with a 5xx is not kept (retrying it may succeed). The caller is the verified
personal agent's client and pairwise User (``request.auth``), or the Django user.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from rest_framework.request import Request
from rest_framework.response import Response

from poppy_django.api.wire_errors import PoppyAPIException
from poppy_django.errors import PoppyError
from poppy_django.process_cache import shared_cache

WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})
#: A key as RFC draft-ietf-httpapi-idempotency-key-header has it (a string), bounded.
_KEY = re.compile(r"[\x21-\x7e]{1,255}")
_PREFIX = "poppy:idempotency:"


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


def _conflict(description: str) -> PoppyAPIException:
    return PoppyAPIException(PoppyError("idempotency_key_conflict", description))


class IdempotentWrites:
    """A DRF ``APIView`` mixin (list it before ``APIView``): writes honour
    ``Idempotency-Key``."""

    idempotency_seconds = 86400
    _idempotency: tuple[str, str] | None = None

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
        name = _PREFIX + digest(f"{_caller(request)}\x00{key}".encode()).hexdigest()
        fingerprint = digest(
            request.method.encode() + b"\x00" + request.path.encode() + b"\x00" + request.body
        ).hexdigest()
        cache = shared_cache("default")
        running = {"fingerprint": fingerprint, "state": "running"}
        if cache.add(name, running, timeout=self.idempotency_seconds):
            self._idempotency = (name, fingerprint)
            return
        stored = cache.get(name) or running
        if stored["fingerprint"] != fingerprint:
            raise _conflict("This Idempotency-Key was used for another request.")
        if stored["state"] == "running":
            raise _conflict("The first request with this Idempotency-Key is still running.")
        raise _Replay(stored)

    def handle_exception(self, exc: Exception) -> Response:
        if isinstance(exc, _Replay):
            return Response(
                exc.stored["data"],
                status=exc.stored["status"],
                headers={"Idempotent-Replayed": "true"},
            )
        return super().handle_exception(exc)  # type: ignore[misc]

    def finalize_response(self, request: Request, response: Any, *args: Any, **kwargs: Any) -> Any:
        response = super().finalize_response(request, response, *args, **kwargs)  # type: ignore[misc]
        if self._idempotency is not None:
            name, fingerprint = self._idempotency
            self._idempotency = None
            cache = shared_cache("default")
            if response.status_code >= 500 or not hasattr(response, "data"):
                cache.delete(name)  # not kept: a retry may succeed
            else:
                done = {
                    "fingerprint": fingerprint,
                    "state": "done",
                    "status": response.status_code,
                    "data": response.data,
                }
                cache.set(name, done, timeout=self.idempotency_seconds)
        return response
