"""Where the endpoint is and who issues its tokens: origin, endpoint URL and issuer.

Parsed here only, from ``POPPY["BASE_URL"]``, ``["PATH"]``, ``["ISSUER"]`` (and the request
when there is one, and an issuer app's :mod:`~poppy_django.verifier.local_issuer` registration),
so discovery, the issuer and the verifier cannot disagree — and none imports another for it.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from django.http import HttpRequest

from poppy_django.conf import endpoint_prefix, poppy_settings
from poppy_django.verifier import local_issuer

#: The development server's origin (``runserver``'s), used when ``BASE_URL`` is unset.
DEFAULT_DEV_ORIGIN = "http://127.0.0.1:8000"


def origin_of(url: str) -> str:
    """``scheme://host[:port]`` of a URL."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def configured_origin() -> str | None:
    """``POPPY["BASE_URL"]``'s origin, or None when it is unset."""
    base_url = poppy_settings.BASE_URL
    return origin_of(base_url) if base_url else None


def public_origin(request: HttpRequest) -> str:
    """``POPPY["BASE_URL"]``'s origin; else the request's scheme and host as Django sees them.

    Django honours ``X-Forwarded-Host`` / ``-Proto`` only when ``USE_X_FORWARDED_HOST`` and
    ``SECURE_PROXY_SSL_HEADER`` say the proxy is trusted. An https issuer upgrades to https.
    ``request.get_host()`` raises ``DisallowedHost`` for a host not in ``ALLOWED_HOSTS``.
    """
    configured = configured_origin()
    if configured:
        parts = urlsplit(configured)
        scheme, netloc = parts.scheme, parts.netloc
    else:
        scheme, netloc = request.scheme or "http", request.get_host()
    if (poppy_settings.ISSUER or "").startswith("https://") and scheme == "http":
        scheme = "https"
        host, _, port = netloc.rpartition(":") if netloc.count(":") == 1 else (netloc, "", "")
        if port == "80":
            netloc = host
    return f"{scheme}://{netloc}"


def endpoint_url(origin: str) -> str:
    """The conversation endpoint at a public origin: origin + ``POPPY["PATH"]``."""
    return origin.rstrip("/") + endpoint_prefix()


def token_issuer() -> str | None:
    """The ``iss`` Session Tokens accepted here carry: ``POPPY["ISSUER"]``, else the default
    of the issuer app installed in this project (its development mode: the public origin),
    else None (unknown: the verifier refuses to start without it)."""
    if poppy_settings.ISSUER:
        return poppy_settings.ISSUER
    local = local_issuer.registered()
    return local.default_issuer() if local is not None else None
