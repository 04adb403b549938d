"""The seam through which an issuer installed in this project tells the verifier about itself.

The core is a resource server: it verifies Session Tokens and never imports the app that
issues them. An issuer app living in the same project (``poppy_django.authority``, in its
production or development mode) registers a :class:`LocalIssuer` in :data:`issuers` from
its ``AppConfig.ready()``; the verifier, discovery and the checks then learn its issuer
identifier and its public keys from here, exactly as they would learn a remote issuer's from
``POPPY["ISSUER"]`` and ``POPPY["TOKENS"]["JWKS_URL"]``. Settings always win over the hook.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

from django.apps import apps

from poppy_django.conf import poppy_settings
from poppy_django.registries import Registry
from poppy_django.verifier.principal import Principal

if TYPE_CHECKING:
    from django.http import HttpRequest


class MintDevelopmentToken(Protocol):
    """Mint a development Session Token bound to the DPoP key ``jkt``, signed in with
    ``account`` (else signed out), for ``audience`` (else the endpoint)."""

    def __call__(
        self,
        *,
        user: str,
        jkt: str,
        client_id: str = ...,
        scopes: Iterable[str] = ...,
        account: str | None = ...,
        audience: str | None = ...,
    ) -> str: ...


@dataclass(frozen=True)
class LocalIssuer:
    """What the issuer app in this project answers; each callable reads current settings."""

    #: Why it issues no tokens here (no signing key; development mode refused with
    #: ``DEBUG=False``), or None when it does.
    refusal: Callable[[], str | None]
    #: The ``iss`` its tokens carry when ``POPPY["ISSUER"]`` is unset (development mode: the
    #: configured public origin), or None when it needs ``POPPY["ISSUER"]``.
    default_issuer: Callable[[], str | None]
    #: The public JWKS its tokens verify with.
    public_jwks: Callable[[], Mapping[str, Any]]
    #: Where the core's ``/.well-known/jwks.json`` serves :attr:`public_jwks`, for discovery
    #: (``auth.jwks_uri``) while :attr:`default_issuer` names the issuer; else None.
    serves_wellknown_jwks: Callable[[], bool]
    #: ``POPPY["SESSION_STATUS"]``'s answer for its tokens: True (active), False (ended) or
    #: ``"signed_out"``.
    session_status: Callable[[Principal], bool | Literal["signed_out"]]
    #: The ``auth`` fields of ``poppy.json`` it publishes (sign-in methods, scopes), given
    #: the request discovery answers (or None).
    discovery_auth: Callable[[HttpRequest | None], Mapping[str, Any]]
    #: Mint a development Session Token (``poppy_chat``'s default); raises
    #: ``ImproperlyConfigured`` when development mode is off.
    mint_development_token: MintDevelopmentToken
    #: The top-level ``poppy.json`` entries of its optional channels that are on (``web``
    #: for browser sessions), given the request discovery answers (or None).
    discovery_channels: Callable[[HttpRequest | None], Mapping[str, Any]] = lambda request: {}
    #: Its RFC 8414 metadata as served (for the discovery checks), or None when it serves none.
    oauth_metadata: Callable[[HttpRequest | None], Mapping[str, Any] | None] = lambda request: None
    #: The client metadata it stored for a personal agent's ``client_id``, or None.
    client_metadata: Callable[[str], Mapping[str, Any] | None] = lambda client_id: None
    #: Pre-register a personal agent as staff would (registered, allowed, its JWKS kept):
    #: ``register_client(client_id, jwks, name)``.
    register_client: Callable[[str, Mapping[str, Any], str], None] | None = None


#: The issuer apps in this project, by app name (``poppy_django.authority``). One counts
#: while its app is installed (``override_settings`` too).
issuers: Registry[LocalIssuer] = Registry("local issuers")


def registered() -> LocalIssuer | None:
    """The issuer app installed in this project, or None (tokens come from elsewhere)."""
    return next((issuer for app, issuer in issuers.items() if apps.is_installed(app)), None)


def issuing() -> LocalIssuer | None:
    """The registered issuer when it issues tokens here (it has a key, its mode may run)."""
    issuer = registered()
    return issuer if issuer is not None and issuer.refusal() is None else None


def token_issuer() -> str | None:
    """The ``iss`` Session Tokens accepted here carry: ``POPPY["ISSUER"]``, else the default
    of the issuer app installed in this project (its development mode: the public origin),
    else None (unknown: the verifier refuses to start without it)."""
    if poppy_settings.ISSUER:
        return poppy_settings.ISSUER
    local = registered()
    return local.default_issuer() if local is not None else None
