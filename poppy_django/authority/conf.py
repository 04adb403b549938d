"""``POPPY_AUTHORITY``: the authorization server's settings, every key with its default.

A Django setting of its own (not a ``POPPY`` key): a project that verifies tokens issued
elsewhere never sees these. Typed like ``POPPY`` (:class:`poppy_django.conf.TypedSettings`:
one parser per key, unknown keys refused by the same rule, import strings imported once).
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed
from django.dispatch import receiver

from poppy_django.conf import (
    Setting,
    TypedSettings,
    flag,
    imported,
    integer,
    items,
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
    # None: Django's authenticate() with the username and password fields
    # (poppy_django.authority.mediated.django_check, which needs the authority extra).
    "MEDIATED_CHECK": None,
    # Failed attempts a Session, a pairwise User or an account (as one client tries it) may
    # make per window before it is refused with 429 rate_limited (its credentials not
    # checked), locked out for the window, doubled at each lockout of the day, up to a day.
    # Past it for an account across every client, a right password must prove a code.
    "MEDIATED_MAX_FAILURES": 5,
    "MEDIATED_WINDOW_SECONDS": 900,
    # Failed attempts one client, and one address, may make per window (across all its
    # Sessions and Users: credential stuffing). Shared by many: past them a wrong password
    # is 429 rate_limited and a right one must prove the one-time code; never a lockout.
    "MEDIATED_CLIENT_MAX_FAILURES": 100,
    "MEDIATED_ADDRESS_MAX_FAILURES": 20,
    # How long a one-time code of a code_required sign-in is accepted, and how many wrong
    # codes end that sign-in as failed.
    "MEDIATED_CODE_SECONDS": 300,
    "MEDIATED_CODE_ATTEMPTS": 3,
    # Import string of looks_unusual(request, session, account_id, *, earlier_failures) ->
    # bool: whether a sign-in the check let in (Authenticated) must also prove a one-time
    # code (PAP-4.7-04). The default asks after failed attempts on the account in the window
    # and on a client's first sign-in to the account. None: never.
    "MEDIATED_CODE_WHEN": "poppy_django.authority.mediated_codes.looks_unusual",
    # Import string of send_code(request, account_id, code) -> str | None: sends the code,
    # answering where it went, masked ("a•••@example.com"), or None when it could not (the
    # sign-in then goes on without a code, with a warning). The default e-mails the
    # account's user. None: no code is sent, as MEDIATED_CODE_WHEN = None.
    "MEDIATED_SEND_CODE": "poppy_django.authority.mediated_codes.email_code",
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


def optional_items(name: str, value: Any) -> list[Any] | None:
    """``MEDIATED_FIELDS``: None (off) or a list (its items checked where they are used)."""
    return None if value is None else items(name, value)


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
    DEVICE_CODE_FAILURES_PER_USER = Setting(optional_integer)
    DEVICE_CODE_FAILURES_PER_ADDRESS = Setting(optional_integer)
    DEVICE_CODE_FAILURE_WINDOW_SECONDS = Setting(number)
    #: :class:`poppy_django.authority.grants.AccountId` or None.
    ACCOUNT_ID = Setting(imported)
    FETCH_TIMEOUT_SECONDS = Setting(number)
    FETCH_MAX_BYTES = Setting(integer)
    CLIENT_METADATA_CACHE_SECONDS = Setting(number)
    CLIENT_FAILURE_CACHE_SECONDS = Setting(number)
    FETCHES_PER_HOST_PER_MINUTE = Setting(optional_integer)
    #: :class:`poppy_django.authority.fetch.TransportFactory` or None.
    FETCH_TRANSPORT = Setting(imported)
    #: :class:`poppy_django.authority.fetch.Resolver` or None.
    RESOLVER = Setting(imported)
    REPLAY_CACHE = Setting(text)
    BROWSER_SESSIONS = Setting(flag)
    BROWSER_RETURN_HOSTS = Setting(optional_domains)
    #: :class:`poppy_django.authority.website.UserForAccount` or None.
    USER_FOR_ACCOUNT = Setting(imported)
    MEDIATED_FIELDS = Setting(optional_items)
    #: :class:`poppy_django.authority.mediated.MediatedCheck` or None.
    MEDIATED_CHECK = Setting(imported)
    MEDIATED_MAX_FAILURES = Setting(integer)
    MEDIATED_WINDOW_SECONDS = Setting(number)
    MEDIATED_CLIENT_MAX_FAILURES = Setting(integer)
    MEDIATED_ADDRESS_MAX_FAILURES = Setting(integer)
    MEDIATED_CODE_SECONDS = Setting(number)
    MEDIATED_CODE_ATTEMPTS = Setting(integer)
    #: :class:`poppy_django.authority.mediated.CodeWhen` or None.
    MEDIATED_CODE_WHEN = Setting(imported)
    #: :class:`poppy_django.authority.mediated.SendCode` or None.
    MEDIATED_SEND_CODE = Setting(imported)

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
