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

        from poppy_django.auth import local_issuer
        from poppy_django.authority import development, keys, tokens
        from poppy_django.authority.checks import check_authority
        from poppy_django.authority.status import session_is_active

        checks.register(check_authority)
        # The core verifies; it learns this issuer's keys and default issuer only from here.
        local_issuer.register(
            local_issuer.LocalIssuer(
                refusal=keys.key_refusal,
                default_issuer=development.default_issuer,
                public_jwks=keys.public_jwks,
                serves_wellknown_jwks=development.enabled,
                session_status=session_is_active,
                discovery_auth=_discovery_auth,
                mint_development_token=tokens.mint_development_token,
            ),
            app=self.name,
        )


def _discovery_auth(request: object) -> dict[str, object]:
    """The sign-in methods and scopes of poppy.json, when the OAuth side is installed."""
    if not serves_oauth():
        return {}
    from django.http import HttpRequest

    from poppy_django.authority.metadata import auth_capabilities

    return auth_capabilities(request if isinstance(request, HttpRequest) else None)
