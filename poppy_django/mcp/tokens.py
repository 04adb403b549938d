"""The MCP server's tokens: Session Tokens issued for exactly its URL, verified with the
default verifier's rules, and the ``WWW-Authenticate`` challenges it answers with.

A Bearer token, or at a DPoP server a DPoP-bound token with its proof (``POPPY["MCP"]
["DPOP"]``, Poppy §4.3). An unauthenticated call is ``401`` with one challenge per scheme
the server reads, each naming the metadata (RFC 9728 §5.1).
"""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import Any

from django.core.signals import setting_changed
from django.dispatch import receiver
from django.http import HttpRequest, HttpResponse

from poppy_django.api.rest_framework import request_info
from poppy_django.conf import poppy_settings
from poppy_django.mcp import config
from poppy_django.verifier import AuthRefusal, Principal
from poppy_django.verifier import dpop as dpop_verifier

_verifiers: dict[str, dpop_verifier.DPoPVerifier] = {}
_lock = threading.Lock()


def _verifier(resource: str) -> dpop_verifier.DPoPVerifier:
    """The default verifier's checks with one audience: exactly this server's URL."""
    with _lock:
        verifier = _verifiers.get(resource)
        if verifier is None:
            base = dpop_verifier.get_verifier()
            verifier = dpop_verifier.DPoPVerifier(
                replace(base.options, audience=(resource,)),
                issuer=base.issuer,
                keys=base.keys,
                path=config.path(),
            )
            _verifiers[resource] = verifier
        return verifier


@receiver(setting_changed)
def _reset_on_change(*, setting: str, **kwargs: Any) -> None:
    if setting in ("POPPY", "SECRET_KEY", "CACHES", "DEBUG"):
        with _lock:
            _verifiers.clear()


def challenges(
    request: HttpRequest,
    error: str | None = None,
    scope: str | None = None,
    *,
    extension: str | None = None,
) -> str:
    """``WWW-Authenticate`` for this server: one challenge per scheme it accepts, Bearer
    then DPoP, each with the same ``error`` and ``scope`` and the protected-resource
    metadata (RFC 9728 §5.1). No ``error`` when the request carried no credentials
    (RFC 6750 §3.1)."""
    params = [f'error="{error}"'] if error else []
    if scope:
        params.append(f'scope="{scope}"')
    if extension:
        params.append(f'extension="{extension}"')
    metadata = f'resource_metadata="{config.metadata_url(request)}"'
    bearer = "Bearer " + ", ".join([*params, metadata])
    if not config.supports_dpop():
        return bearer
    algs = " ".join(poppy_settings.token_options.dpop_algorithms)
    return bearer + ", DPoP " + ", ".join([*params, f'algs="{algs}"', metadata])


def _scheme(request: HttpRequest) -> str:
    scheme, _, _ = request.headers.get("Authorization", "").strip().partition(" ")
    return scheme.lower()


def authenticate(request: HttpRequest) -> Principal | HttpResponse:
    """The caller, or the ``401`` refusing it: a Bearer token, or at a DPoP server a
    DPoP-bound token with its proof, each issued for this URL."""
    verifier = _verifier(config.resource_url(request))
    scheme = _scheme(request)
    try:
        if scheme == "bearer" or not config.supports_dpop():
            return verifier.verify_bearer(request_info(request))
        return verifier(request_info(request))
    except AuthRefusal as refusal:
        response = refusal.response()
        error = refusal.code if "Authorization" in request.headers else None
        response["WWW-Authenticate"] = challenges(request, error, _scope_of(refusal))
        return response


def _scope_of(refusal: AuthRefusal) -> str | None:
    return refusal.www_authenticate.partition('scope="')[2].partition('"')[0] or None
