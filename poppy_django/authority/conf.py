"""``POPPY_AUTHORITY``: the authorization server's settings, every key with its default.

A Django setting of its own (not a ``POPPY`` key): a project that verifies tokens issued
elsewhere never sees these. Typed like ``POPPY`` (:class:`poppy_django.conf.TypedSettings`:
one parser per key, unknown keys refused by the same rule, import strings imported once).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed
from django.dispatch import receiver

from poppy_django.conf import (
    Setting,
    TypedSettings,
    imported,
    integer,
    number,
    optional_integer,
    optional_text,
    text,
    texts,
    texts_by_name,
)

DEFAULTS: dict[str, Any] = {
    # PEM file of the ES256 signing key; None: $POPPY_AUTHORITY_SIGNING_KEY, else the
    # development authority's key (development mode).
    "SIGNING_KEY_FILE": None,
    # Lifetime of a Session Token: short, so a token outlives its Session only briefly.
    "SESSION_TOKEN_SECONDS": 300,
    # Clock skew tolerated on assertions and token-endpoint proofs.
    "LEEWAY_SECONDS": 30,
    # How old a token-endpoint DPoP proof may be.
    "PROOF_MAX_AGE_SECONDS": 60,
    # "open": any HTTPS client_id whose metadata can be fetched; "registered": only clients
    # staff pre-registered (Client.registered) may start Sessions.
    "CLIENTS": "open",
    # New Sessions one client may start per minute (None: no limit).
    "SESSIONS_PER_CLIENT_PER_MINUTE": 600,
    # The organization domains this issuer speaks for (OAuth metadata ``poppy_domains``);
    # None: poppy.json's organization domain.
    "DOMAINS": None,
    # Scopes offered besides poppy:read and poppy:write: {"orders:read": "See your orders"}.
    "CUSTOM_SCOPES": {},
    # Device Sign-In: how long its codes live and how often the agent may poll.
    "DEVICE_CODE_SECONDS": 600,
    "DEVICE_INTERVAL_SECONDS": 5,
    # Import string of account_id(user) -> str: the account a Django user signs in to;
    # None: the username.
    "ACCOUNT_ID": None,
    # Client metadata (and JWKS) fetching.
    "FETCH_TIMEOUT_SECONDS": 5,
    "FETCH_MAX_BYTES": 100 * 1024,
    "CLIENT_METADATA_CACHE_SECONDS": 3600,
    # Import string of a zero-argument factory returning an httpx transport (tests route
    # their personal agents' sites through it); None: httpx's default transport.
    "FETCH_TRANSPORT": None,
    # Import string of resolve(host) -> list of IP address strings; None: the system resolver.
    "RESOLVER": None,
    # The Django cache alias of the assertion/proof replay cache.
    "REPLAY_CACHE": "default",
}


def clients_policy(name: str, value: Any) -> str:
    """``CLIENTS``: ``"open"`` or ``"registered"``."""
    if value not in ("open", "registered"):
        raise ImproperlyConfigured(f'{name} is "open" or "registered", not {value!r}.')
    return str(value)


def scope_descriptions(name: str, value: Any) -> dict[str, str]:
    """``CUSTOM_SCOPES``: scope -> the words the consent page shows."""
    return texts_by_name(name, value)


def optional_domains(name: str, value: Any) -> list[str] | None:
    return None if value is None else texts(name, value)


class AuthoritySettings(TypedSettings):
    """Typed, cached access to ``settings.POPPY_AUTHORITY``: one attribute per key (DEFAULTS)."""

    SETTING = "POPPY_AUTHORITY"
    DEFAULTS = DEFAULTS

    SIGNING_KEY_FILE = Setting(optional_text)
    SESSION_TOKEN_SECONDS = Setting(integer)
    LEEWAY_SECONDS = Setting(number)
    PROOF_MAX_AGE_SECONDS = Setting(number)
    CLIENTS = Setting(clients_policy)
    SESSIONS_PER_CLIENT_PER_MINUTE = Setting(optional_integer)
    DOMAINS = Setting(optional_domains)
    CUSTOM_SCOPES = Setting(scope_descriptions)
    DEVICE_CODE_SECONDS = Setting(integer)
    DEVICE_INTERVAL_SECONDS = Setting(integer)
    #: callable(user) -> str: the account a Django user signs in to.
    ACCOUNT_ID: Setting[Callable[..., Any] | None] = Setting(imported)
    FETCH_TIMEOUT_SECONDS = Setting(number)
    FETCH_MAX_BYTES = Setting(integer)
    CLIENT_METADATA_CACHE_SECONDS = Setting(number)
    #: zero-argument factory returning an httpx transport.
    FETCH_TRANSPORT: Setting[Callable[..., Any] | None] = Setting(imported)
    #: resolve(host) -> list of IP address strings.
    RESOLVER: Setting[Callable[..., Any] | None] = Setting(imported)
    REPLAY_CACHE = Setting(text)

    def validate(self) -> None:
        """Parse every key now (the system check), raising the first error."""
        for name in self.DEFAULTS:
            getattr(self, name)


_settings = AuthoritySettings()


def authority_settings() -> AuthoritySettings:
    """The current settings (parsed at first use of each key; reloaded on a change)."""
    return _settings


@receiver(setting_changed)
def _reload(*, setting: str, **kwargs: Any) -> None:
    if setting in ("POPPY_AUTHORITY", "POPPY"):
        _settings.reload()
