from __future__ import annotations

import importlib.util

from django.apps import AppConfig


def serves_oauth() -> bool:
    """Whether the authorization server's OAuth side can run: its extra (Authlib, httpx) is
    installed. Without it the app still runs its development mode (``poppy_token``)."""
    return all(importlib.util.find_spec(name) for name in ("authlib", "httpx"))


class AuthorityConfig(AppConfig):
    name = "poppy_django.authority"
    label = "poppy_authority"
    verbose_name = "Poppy authorization server"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.core import checks

        # Here, not at the top: Django imports this module before the models are ready.
        from poppy_django.authority import development, keys, tokens
        from poppy_django.authority.checks import check_authority
        from poppy_django.authority.status import session_is_active
        from poppy_django.verifier import local_issuer

        checks.register(check_authority)
        if serves_oauth():  # sign-ins exist only where the OAuth side runs (its extra)
            from poppy_django.authority import account_changes

            account_changes.connect()
        # The core verifies; it learns this issuer's keys and default issuer only from here.
        local_issuer.issuers.register(
            self.name,
            local_issuer.LocalIssuer(
                refusal=keys.key_refusal,
                default_issuer=development.default_issuer,
                public_jwks=keys.public_jwks,
                serves_wellknown_jwks=development.enabled,
                session_status=session_is_active,
                discovery_auth=_discovery_auth,
                mint_development_token=tokens.mint_development_token,
                discovery_channels=_discovery_channels,
                oauth_metadata=_oauth_metadata,
                client_metadata=_client_metadata,
                register_client=_register_client,
            ),
        )


# The helpers below import when called: the OAuth side needs the authority's extra
# (Authlib), and the models are not ready when Django imports this module. No cycle: none of
# these modules imports this one.


def _discovery_auth(request: object) -> dict[str, object]:
    """The sign-in methods and scopes of poppy.json, when the OAuth side is installed."""
    if not serves_oauth():
        return {}
    from django.http import HttpRequest

    from poppy_django.authority.capabilities import auth_capabilities

    return auth_capabilities(request if isinstance(request, HttpRequest) else None)


def _discovery_channels(request: object) -> dict[str, object]:
    """``web`` of poppy.json when browser sessions are on (they need the OAuth side)."""
    if not serves_oauth():
        return {}
    from django.http import HttpRequest

    from poppy_django.authority.browser import discovery_entry

    web = discovery_entry(request if isinstance(request, HttpRequest) else None)
    return {"web": web} if web is not None else {}


def _oauth_metadata(request: object) -> dict[str, object] | None:
    """The RFC 8414 metadata this issuer serves (the discovery checks read it), or None."""
    if not serves_oauth():
        return None
    from django.core.exceptions import ImproperlyConfigured
    from django.http import HttpRequest

    from poppy_django.authority.metadata import metadata_document

    try:
        return metadata_document(request if isinstance(request, HttpRequest) else None)
    except ImproperlyConfigured:
        return None  # no issuer or key: the authority's own checks say so


def _client_metadata(client_id: str) -> dict[str, object] | None:
    """The client metadata stored for ``client_id`` (fetched, or kept at registration)."""
    from poppy_django.authority.models import Client

    found = Client.objects.filter(client_id=client_id).values_list("metadata", flat=True).first()
    return found if isinstance(found, dict) else None


def _register_client(client_id: str, jwks: object, name: str) -> None:
    """Pre-register a client as staff would on the admin's Clients form: registered,
    allowed, with its JWKS stored, so its metadata is never fetched."""
    from poppy_django.authority.models import Client

    Client.objects.update_or_create(
        client_id=client_id,
        defaults={
            "registered": True,
            "status": Client.Status.ALLOWED,
            "jwks": jwks,
            "fetched_at": None,
            "name": name,
        },
    )
