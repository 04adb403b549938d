"""Where the endpoint is: its public origin and URL.

Parsed here only, from ``POPPY["BASE_URL"]``, ``["PATH"]`` and ``["ISSUER"]`` (and the
request when there is one), so discovery, the issuer and the verifier cannot disagree — and
none imports another for it. Who issues the tokens accepted here is
:func:`poppy_django.verifier.local_issuer.token_issuer`.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from django.http import HttpRequest

from poppy_django.conf import endpoint_prefix, poppy_settings

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


def is_endpoint_path(path_info: str) -> bool:
    """Whether a path (below the script prefix) is the endpoint's or under it."""
    endpoint = endpoint_prefix()  # the same value the URLconf mounts the endpoint at
    return path_info == endpoint or path_info.startswith(endpoint + "/")


def endpoint_url(origin: str) -> str:
    """The conversation endpoint at a public origin: origin + ``POPPY["PATH"]``."""
    return origin.rstrip("/") + endpoint_prefix()
