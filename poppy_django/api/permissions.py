"""DRF permission classes for Poppy callers, on the endpoint and on a company's own APIs.

::

    class OrderList(APIView):
        authentication_classes = [DPoPAuthentication]
        permission_classes = [HasPoppyScope("orders:read")]

A Session Token's scopes count only when the User is signed in (the wire's rule), so
:class:`HasPoppyScope` is signed-in only; :class:`IsPoppySignedIn` asks for an account and
no scope; :class:`IsPoppyCaller` for any verified personal agent. Refusals carry the wire's
error code and a ``WWW-Authenticate: DPoP error=...`` challenge (DRF's exception handler
sends an exception's ``auth_header``), so a personal agent knows to sign in or ask for more.
"""

from __future__ import annotations

from typing import Any

from rest_framework import exceptions
from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from poppy_django.verifier import Principal


class PoppyPermissionDenied(exceptions.PermissionDenied):
    """403 with the wire's ``{"error", "error_description"}`` body and a DPoP challenge."""

    def __init__(self, error: str, description: str, scope: str | None = None) -> None:
        super().__init__(detail={"error": error, "error_description": description}, code=error)
        challenge = f'DPoP error="{error}"'
        if scope:
            challenge += f', scope="{scope}"'
        self.auth_header = challenge
        self.error = error


def principal_of(request: Request) -> Principal | None:
    return request.auth if isinstance(request.auth, Principal) else None


class IsPoppyCaller(BasePermission):
    """Any personal agent the verifier accepted (the endpoint's default)."""

    def has_permission(self, request: Request, view: Any) -> bool:
        return principal_of(request) is not None


class IsPoppySignedIn(BasePermission):
    """A personal agent whose User is signed in to an account (``request.user.account_id``)."""

    def has_permission(self, request: Request, view: Any) -> bool:
        principal = principal_of(request)
        if principal is None:
            return False
        if not principal.signed_in or not principal.account_id:
            raise PoppyPermissionDenied("sign_in_required", "Sign in to use this API.")
        return True


class HasPoppyScope(IsPoppySignedIn):
    """Signed in, with every scope named: ``permission_classes = [HasPoppyScope("orders:read")]``.

    An instance stands in for its class in ``permission_classes`` (DRF calls each entry to
    make the view's permissions; calling an instance returns it).
    """

    def __init__(self, *scopes: str) -> None:
        if not scopes:
            raise TypeError("HasPoppyScope needs at least one scope.")
        self.scopes = scopes

    def __call__(self) -> HasPoppyScope:
        return self

    def has_permission(self, request: Request, view: Any) -> bool:
        if not super().has_permission(request, view):
            return False
        principal = principal_of(request)
        assert principal is not None
        missing = [scope for scope in self.scopes if scope not in principal.scopes]
        if missing:
            raise PoppyPermissionDenied(
                "insufficient_scope",
                f"This API needs the {' '.join(missing)} scope.",
                scope=" ".join(missing),
            )
        return True

    def __repr__(self) -> str:
        return f"HasPoppyScope({', '.join(map(repr, self.scopes))})"
