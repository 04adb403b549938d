"""The public URL of a request: what a DPoP proof's ``htu`` must name."""

from __future__ import annotations

from urllib.parse import urlsplit

from django.http import HttpRequest

from poppy_django.conf import poppy_settings


def public_origin(request: HttpRequest) -> str:
    """``POPPY["BASE_URL"]``'s origin; else the request's scheme and host as Django sees them.

    Django honours ``X-Forwarded-Host`` / ``-Proto`` only when ``USE_X_FORWARDED_HOST`` and
    ``SECURE_PROXY_SSL_HEADER`` say the proxy is trusted. An https issuer upgrades to https.
    ``request.get_host()`` raises ``DisallowedHost`` for a host not in ``ALLOWED_HOSTS``.
    """
    base_url = poppy_settings.BASE_URL
    if base_url:
        parts = urlsplit(base_url)
        scheme, netloc = parts.scheme, parts.netloc
    else:
        scheme, netloc = request.scheme or "http", request.get_host()
    issuer = poppy_settings.ISSUER or ""
    if issuer.startswith("https://") and scheme == "http":
        scheme = "https"
        host, _, port = netloc.rpartition(":") if netloc.count(":") == 1 else (netloc, "", "")
        if port == "80":
            netloc = host
    return f"{scheme}://{netloc}"


def public_url(request: HttpRequest) -> str:
    """The full public URL, path and query included (the verifier strips the query for htu)."""
    return public_origin(request) + request.get_full_path()
