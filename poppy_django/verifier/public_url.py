"""The public URL of a request: what a DPoP proof's ``htu`` must name."""

from __future__ import annotations

from django.http import HttpRequest

from poppy_django.addresses import public_origin


def public_url(request: HttpRequest) -> str:
    """The full public URL, path and query included (the verifier strips the query for htu)."""
    return public_origin(request) + request.get_full_path()
