"""Discovery: the endpoint's ``agent.protocols`` entry and a whole ``poppy.json`` from settings.

An external authorization server may build ``poppy.json`` itself, calling
:func:`protocol_entry` to advertise the endpoint; otherwise :func:`poppy_json_view` serves it
at ``/.well-known/poppy.json``. With an issuer app installed in this project (the
authority), the ``auth`` object carries what it registered (issuer, sign-in methods,
scopes). ``POPPY["DISCOVERY"]`` sub-keys (all optional):

``PROTOCOL_VERSION`` ("0.2": what today's personal agents accept; the conversation wire is
the same in 0.1 and 0.2), ``ORGANIZATION`` ({}: e.g. ``{"name": "Acme", "domain":
"acme.example"}``; ``domain`` defaults to the host serving the document), ``AUTH`` ({}: extra
fields of the ``auth`` object next to ``issuer``), ``EXTRA`` ({}: extra top-level fields),
``APIS`` ([]: the company's own APIs that accept Session Tokens, each ``{"type": "openapi",
"url": ...}``; a URL starting with ``/`` is taken at the public origin).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.http import require_safe

from poppy_django.addresses import configured_origin, endpoint_url, public_origin
from poppy_django.api.feedback import discovery_entry as feedback_entry
from poppy_django.conf import poppy_settings, sub_settings
from poppy_django.errors import error_response
from poppy_django.registries import Registry
from poppy_django.verifier import local_issuer

PROTOCOL_TYPE = "poppy"
#: Personal agents use a document only at a version they support (the public SDK: "0.2").
DEFAULT_PROTOCOL_VERSION = "0.2"
#: Where :mod:`poppy_django.wellknown_urls` serves the local issuer's JWKS.
JWKS_PATH = "/.well-known/jwks.json"
DISCOVERY_KEYS = frozenset({"PROTOCOL_VERSION", "ORGANIZATION", "AUTH", "EXTRA", "APIS"})

#: An entry a part that plugs in adds to ``poppy.json`` (None while it is off), given the
#: request discovery answers (or None).
Entry = Callable[[HttpRequest | None], Mapping[str, Any] | None]
#: The parts' entries of ``poppy.json``'s ``apis`` (the MCP server), by name, each listed
#: while it gives one.
apis: Registry[Entry] = Registry("poppy.json apis")
#: The protocol extensions (§3.3) offered in ``poppy.json``'s ``extensions`` (Operations),
#: by the extension's name, each while its entry gives one.
extensions: Registry[Entry] = Registry("poppy.json extensions")


def document_origin(request: HttpRequest | None) -> str:
    """The public origin the document speaks for: the request's, else ``BASE_URL``'s."""
    if request is not None:
        return public_origin(request)
    configured = configured_origin()
    if not configured:
        raise ImproperlyConfigured('Without a request, the endpoint URL needs POPPY["BASE_URL"].')
    return configured


def protocol_entry(request: HttpRequest | None = None) -> dict[str, str]:
    """``{"type": "poppy", "endpoint": <url>}`` for ``poppy.json``'s ``agent.protocols``."""
    return {"type": PROTOCOL_TYPE, "endpoint": endpoint_url(document_origin(request))}


def _options() -> dict[str, Any]:
    return sub_settings("DISCOVERY", DISCOVERY_KEYS)


def _issuer_capabilities(request: HttpRequest | None) -> dict[str, Any]:
    """The ``auth`` fields the issuer app installed in this project publishes (sign-in
    methods, scopes), learnt through its :mod:`~poppy_django.verifier.local_issuer` registration."""
    local = local_issuer.registered()
    return dict(local.discovery_auth(request)) if local is not None else {}


def poppy_document(request: HttpRequest | None = None) -> dict[str, Any]:
    """The whole ``poppy.json``: protocol_version, organization, auth.issuer, agent protocols."""
    options = _options()
    auth: dict[str, Any] = {**_issuer_capabilities(request), **dict(options.get("AUTH") or {})}
    found = local_issuer.token_issuer()
    if found:
        auth["issuer"] = found
    local = local_issuer.issuing()
    if local is not None and local.serves_wellknown_jwks() and not poppy_settings.ISSUER:
        auth.setdefault("jwks_uri", document_origin(request) + JWKS_PATH)
    organization = dict(options.get("ORGANIZATION") or {})
    # The document speaks for the host serving it: agents refuse another domain here.
    organization.setdefault("domain", urlsplit(document_origin(request)).hostname)
    document: dict[str, Any] = {
        **dict(options.get("EXTRA") or {}),
        "protocol_version": str(options.get("PROTOCOL_VERSION") or DEFAULT_PROTOCOL_VERSION),
        "organization": organization,
        "auth": auth,
        "agent": {"protocols": [protocol_entry(request)]},
    }
    if options.get("APIS"):
        document["apis"] = [_api_entry(dict(api), request) for api in options["APIS"]]
    document.update(_channel_entries(request))
    for api_entry in apis:
        entry = api_entry(request)
        if entry is not None:
            document.setdefault("apis", []).append(dict(entry))
    extensions = _extensions(request)
    if extensions:
        document["extensions"] = {**dict(document.get("extensions") or {}), **extensions}
    return document


def _channel_entries(request: HttpRequest | None) -> dict[str, Any]:
    """The optional channels that are on: ``web`` (browser sessions, the issuer app's) and
    ``feedback``."""
    local = local_issuer.registered()
    entries: dict[str, Any] = dict(local.discovery_channels(request)) if local else {}
    feedback = feedback_entry(request)
    if feedback is not None:
        entries["feedback"] = feedback
    return entries


def _extensions(request: HttpRequest | None) -> dict[str, Any]:
    """The protocol extensions this company offers (§3.3), those registered that are on."""
    found = {name: extension(request) for name, extension in extensions.items()}
    return {name: dict(entry) for name, entry in found.items() if entry is not None}


def _api_entry(api: dict[str, Any], request: HttpRequest | None) -> dict[str, Any]:
    """A company API accepting Session Tokens; a path-only ``url`` gets the public origin."""
    url = str(api.get("url", ""))
    if url.startswith("/"):
        api["url"] = document_origin(request) + url
    return api


@require_safe
def poppy_json_view(request: HttpRequest) -> JsonResponse:
    """``GET /.well-known/poppy.json``: public, cacheable, readable cross-origin."""
    response = JsonResponse(poppy_document(request))
    response["Cache-Control"] = "public, max-age=300"
    response["Access-Control-Allow-Origin"] = "*"
    return response


@require_safe
def jwks_view(request: HttpRequest) -> HttpResponse:
    """``GET`` the public keys of the issuer app in this project (404 while it issues none).

    The one JWKS view: ``/.well-known/jwks.json`` (development mode's ``jwks_uri``) and the
    authority's ``oauth/jwks.json`` both route here.
    """
    local = local_issuer.issuing()
    if local is None:
        return error_response("not_found")
    response = JsonResponse(dict(local.public_jwks()))
    response["Cache-Control"] = "public, max-age=300"
    response["Access-Control-Allow-Origin"] = "*"
    return response
