"""``POPPY_AUTHORITY``: the authorization server's settings, every key with its default.

A Django setting of its own (not a ``POPPY`` key): a project that verifies tokens issued
elsewhere never sees these. Unknown keys raise ``ImproperlyConfigured`` naming them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed
from django.dispatch import receiver
from django.utils.module_loading import import_string

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
    # Wrong user codes tolerated on the device page per logged-in user and per client
    # address within DEVICE_CODE_FAILURE_WINDOW_SECONDS (RFC 8628 §5.1); past them the page
    # takes no code until the window has passed. None: no limit.
    "DEVICE_CODE_FAILURES_PER_USER": 10,
    "DEVICE_CODE_FAILURES_PER_ADDRESS": 50,
    "DEVICE_CODE_FAILURE_WINDOW_SECONDS": 900,
    # Import string of account_id(user) -> str: the account a Django user signs in to;
    # None: the username.
    "ACCOUNT_ID": None,
    # Client metadata (and JWKS) fetching.
    "FETCH_TIMEOUT_SECONDS": 5,
    "FETCH_MAX_BYTES": 100 * 1024,
    "CLIENT_METADATA_CACHE_SECONDS": 3600,
    # How long a client whose metadata could not be fetched or used is refused unfetched.
    "CLIENT_FAILURE_CACHE_SECONDS": 300,
    # Metadata and JWKS fetches per client host per minute (None: no limit); past it a
    # stored client keeps its cached metadata and an unknown one is refused.
    "FETCHES_PER_HOST_PER_MINUTE": 20,
    # Import string of a zero-argument factory returning an httpx transport (tests route
    # their personal agents' sites through it); None: httpx's default transport.
    "FETCH_TRANSPORT": None,
    # Import string of resolve(host) -> list of IP address strings; None: the system resolver.
    "RESOLVER": None,
    # The Django cache alias of the assertion/proof replay cache.
    "REPLAY_CACHE": "default",
    # Browser sessions (docs/channels.md): the personal agent's browser posts a signed
    # assertion to /poppy/browser-session and is logged in to a Django session that carries
    # its Poppy Session's sign-in state and scopes. Needs BrowserSessionMiddleware.
    "BROWSER_SESSIONS": False,
    # Hosts a browser session may return to (each also allows its subdomains); None: the
    # organization domains (DOMAINS, else poppy.json's) and the host serving the endpoint.
    "BROWSER_RETURN_HOSTS": None,
    # Import string of user_for_account(account_id) -> user | None: the Django user a
    # signed-in Session's account is; None: the user whose username is the account id.
    "USER_FOR_ACCOUNT": None,
    # Mediated Sign-In (docs/channels.md): the agent relays the fields the User typed to
    # /poppy/sign-in. Off with None; on with the declared fields, e.g.
    # [{"name": "username", "label": "Username", "secret": False}, ...].
    "MEDIATED_FIELDS": None,
    # Import string of check(request, credentials) -> Authenticated | CodeRequired | None;
    # the default is Django's authenticate() with the username and password fields.
    "MEDIATED_CHECK": "poppy_django.authority.mediated.django_check",
    # Failed attempts a Session, a pairwise User or an account may make per window before
    # it is refused with 429 rate_limited (and its credentials are not checked).
    "MEDIATED_MAX_FAILURES": 5,
    "MEDIATED_WINDOW_SECONDS": 900,
    # How long a one-time code of a code_required sign-in is accepted, and how many wrong
    # codes end that sign-in as failed.
    "MEDIATED_CODE_SECONDS": 300,
    "MEDIATED_CODE_ATTEMPTS": 3,
}

IMPORT_STRINGS = frozenset(
    {"FETCH_TRANSPORT", "RESOLVER", "ACCOUNT_ID", "USER_FOR_ACCOUNT", "MEDIATED_CHECK"}
)


@dataclass(frozen=True)
class AuthoritySettings:
    """``POPPY_AUTHORITY`` merged over :data:`DEFAULTS`."""

    values: Mapping[str, Any]

    def __getattr__(self, name: str) -> Any:
        try:
            return self.values[name]
        except KeyError:
            raise AttributeError(name) from None

    def hook(self, name: str) -> Callable[..., Any] | None:
        """The callable an import-string key names, or None."""
        value = self.values[name]
        if value is None or callable(value):
            return value
        try:
            hook: Callable[..., Any] = import_string(value)
            return hook
        except ImportError as exc:
            raise ImproperlyConfigured(
                f"POPPY_AUTHORITY[{name!r}] = {value!r} cannot be imported: {exc}"
            ) from exc


@functools.cache
def authority_settings() -> AuthoritySettings:
    """The current settings (cached; reloaded when ``POPPY_AUTHORITY`` changes)."""
    raw = dict(getattr(settings, "POPPY_AUTHORITY", {}) or {})
    unknown = sorted(set(raw) - set(DEFAULTS))
    if unknown:
        raise ImproperlyConfigured(
            f"Unknown POPPY_AUTHORITY key(s): {', '.join(unknown)}. Known: {', '.join(DEFAULTS)}."
        )
    if raw.get("CLIENTS", "open") not in ("open", "registered"):
        raise ImproperlyConfigured('POPPY_AUTHORITY["CLIENTS"] is "open" or "registered".')
    return AuthoritySettings({**DEFAULTS, **raw})


@receiver(setting_changed)
def _reload(*, setting: str, **kwargs: Any) -> None:
    if setting in ("POPPY_AUTHORITY", "POPPY"):
        authority_settings.cache_clear()
