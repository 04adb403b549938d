"""``GET /.well-known/oauth-protected-resource/{PATH}``: the MCP server as an OAuth protected
resource (RFC 9728), so a personal agent learns which issuer's tokens, scopes and DPoP
algorithms it takes."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse

from poppy_django.conf import poppy_settings
from poppy_django.errors import error_response
from poppy_django.mcp import config, tools
from poppy_django.verifier import local_issuer


def protected_resource_metadata(request: HttpRequest) -> HttpResponse:
    """``GET /.well-known/oauth-protected-resource/{PATH}`` (RFC 9728)."""
    if not config.enabled() or request.method not in ("GET", "HEAD"):
        return error_response("not_found")
    issuer = local_issuer.token_issuer()
    document: dict[str, Any] = {
        "resource": config.resource_url(request),
        "authorization_servers": [issuer] if issuer else [],
        "scopes_supported": sorted(_scopes()),
        "bearer_methods_supported": ["header"],
    }
    if config.supports_dpop():  # a DPoP server (RFC 9728 §2): its tokens are DPoP-bound only
        document["dpop_signing_alg_values_supported"] = list(
            poppy_settings.token_options.dpop_algorithms
        )
        document["dpop_bound_access_tokens_required"] = True
    response = JsonResponse(document)
    response["Cache-Control"] = "public, max-age=300"
    response["Access-Control-Allow-Origin"] = "*"
    return response


def _scopes() -> set[str]:
    return {
        role.removeprefix("scope:")
        for tool in tools.offered()
        for role in tool.roles
        if role.startswith("scope:")
    }
