"""The issuer's OAuth metadata (RFC 8414) and the ``auth`` object of ``poppy.json``.

The two must agree exactly: a personal agent compares ``issuer`` character for character and
finds the organization's domain in ``poppy_domains`` before it trusts the issuer.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from authlib.oauth2.rfc8414 import AuthorizationServerMetadata
from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest, JsonResponse
from django.urls import reverse
from django.views.decorators.http import require_safe

from poppy_django import addresses
from poppy_django.addresses import public_origin
from poppy_django.authority.conf import authority_settings
from poppy_django.conf import debug_configured, poppy_settings
from poppy_django.errors import error_response
from poppy_django.verifier import local_issuer

POPPY_SCOPES = {
    "poppy:read": "Read your account through the personal agent",
    "poppy:write": "Act on your account through the personal agent",
}
JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
DEVICE_CODE = "urn:ietf:params:oauth:grant-type:device_code"


def issuer() -> str:
    """This authority's identifier, compared exactly by agents: the one the verifier expects
    (:func:`poppy_django.verifier.local_issuer.token_issuer`), which must be known here.

    ``POPPY["ISSUER"]``; in development mode without it, the public origin.
    """
    configured = local_issuer.token_issuer()
    if not configured:
        raise ImproperlyConfigured('The authority needs POPPY["ISSUER"] (its https URL).')
    return configured


def origin(request: HttpRequest | None) -> str:
    """The public origin endpoints are advertised at: the request's, else ``BASE_URL``'s."""
    if request is not None:
        return public_origin(request)
    base_url = poppy_settings.BASE_URL
    if not base_url:
        raise ImproperlyConfigured('Without a request, the authority needs POPPY["BASE_URL"].')
    parts = urlsplit(base_url)
    return f"{parts.scheme}://{parts.netloc}"


def endpoint(request: HttpRequest | None, name: str) -> str:
    """The public URL of one of the authority's routes (``poppy_authority:<name>``)."""
    return origin(request) + reverse(f"poppy_authority:{name}")


def token_audience(request: HttpRequest | None) -> list[str]:
    """What a Session Token's ``aud`` names: ``TOKENS["AUDIENCE"]``, else the endpoint URL."""
    configured = poppy_settings.token_options.audience
    return list(configured) if configured else [addresses.endpoint_url(origin(request))]


def scopes() -> dict[str, str]:
    """Every scope offered: Poppy's two and the company's own."""
    return {**POPPY_SCOPES, **dict(authority_settings().CUSTOM_SCOPES or {})}


def domains(request: HttpRequest | None) -> list[str]:
    """``POPPY_AUTHORITY["DOMAINS"]``, else poppy.json's organization domain (or the host)."""
    configured = authority_settings().DOMAINS
    if configured:
        return [str(domain).lower() for domain in configured]
    organization = (poppy_settings.DISCOVERY or {}).get("ORGANIZATION") or {}
    domain = organization.get("domain") or urlsplit(origin(request)).hostname
    return [str(domain).lower()]


def metadata_document(request: HttpRequest | None) -> dict[str, Any]:
    """RFC 8414 metadata as this issuer advertises it (unchecked: see :func:`server_metadata`)."""
    algorithms = list(poppy_settings.token_options.dpop_algorithms)
    return {
        "issuer": issuer(),
        "token_endpoint": endpoint(request, "token"),
        "revocation_endpoint": endpoint(request, "revoke"),
        "device_authorization_endpoint": endpoint(request, "device"),
        "jwks_uri": endpoint(request, "jwks"),
        "authorization_endpoint": endpoint(request, "authorize"),
        "grant_types_supported": [
            JWT_BEARER,
            DEVICE_CODE,
            "authorization_code",
            "refresh_token",
        ],
        "response_types_supported": ["code"],
        "code_challenge_methods_supported": ["S256"],
        "authorization_response_iss_parameter_supported": True,
        "token_endpoint_auth_methods_supported": ["private_key_jwt"],
        "token_endpoint_auth_signing_alg_values_supported": ["ES256", "RS256"],
        "revocation_endpoint_auth_methods_supported": ["private_key_jwt"],
        "revocation_endpoint_auth_signing_alg_values_supported": ["ES256", "RS256"],
        "scopes_supported": list(scopes()),
        "dpop_signing_alg_values_supported": algorithms,
        "poppy_domains": domains(request),
    }


def is_https(document: dict[str, Any]) -> bool:
    """Whether the issuer and every URL the metadata advertises are https."""
    return all(
        not (isinstance(value, str) and value.startswith("http://")) for value in document.values()
    )


def server_metadata(request: HttpRequest | None) -> dict[str, Any]:
    """RFC 8414 metadata, checked by Authlib's model of it before it is served.

    Over http (development) every rule but "https only" is checked: Authlib sees the
    document with its URLs' scheme made https. The view decides what an http document gets.
    """
    document = metadata_document(request)
    judged = {
        key: "https://" + value.removeprefix("http://")
        if isinstance(value, str) and value.startswith("http://")
        else value
        for key, value in document.items()
    }
    AuthorizationServerMetadata(judged).validate()
    return document


@require_safe
def metadata_view(request: HttpRequest, issuer_path: str = "") -> JsonResponse:
    """``GET /.well-known/oauth-authorization-server[/<issuer path>]`` (RFC 8414 §3.1)."""
    if issuer_path.strip("/") != urlsplit(issuer()).path.strip("/"):
        return error_response("not_found")
    document = server_metadata(request)
    if not is_https(document) and not debug_configured():
        # RFC 8414 metadata is https only and personal agents refuse anything else: say so
        # (check poppy_django.E302 names it too) instead of serving what none can use.
        return error_response(
            "not_found",
            f"No OAuth metadata over http: the issuer {document['issuer']} and its endpoints "
            'must be https. Serve the project over TLS and set POPPY["BASE_URL"] and '
            'POPPY["ISSUER"] to its https origin.',
        )
    response = JsonResponse(document)
    response["Cache-Control"] = "public, max-age=300"
    response["Access-Control-Allow-Origin"] = "*"
    return response
