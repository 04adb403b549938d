"""System checks of the auth settings (``poppy_django.E101``-``E108``, ``W101``-``W104``).

``poppy_django.checks.check_auth`` runs them once the POPPY dict itself is valid (E004).
The DPoP checks run only when ``POPPY["AUTHENTICATE"]`` is the default DPoP verifier; the
development authority check always runs, because its tokens are accepted by whichever
verifier trusts its key.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core import checks
from django.core.exceptions import ImproperlyConfigured

from poppy_django.conf import debug_configured, poppy_settings
from poppy_django.token_options import ASYMMETRIC_ALGORITHMS, refused_algorithms
from poppy_django.verifier import dpop, fake, local_issuer

DPOP_VERIFIER = "poppy_django.verifier.dpop.verify"
FAKE_VERIFIER = "poppy_django.verifier.fake.verify"
#: Cache backends that cannot hold a replay cache shared by processes (or at all).
_DUMMY_CACHE = "django.core.cache.backends.dummy.DummyCache"
_LOCAL_CACHE = "django.core.cache.backends.locmem.LocMemCache"


def _configured_verifier() -> Any:
    """``POPPY["AUTHENTICATE"]`` as set."""
    return poppy_settings.raw("AUTHENTICATE")


def _uses_dpop_verifier() -> bool:
    configured = _configured_verifier()
    if configured == DPOP_VERIFIER:
        return True
    return configured is dpop.verify


def check_dev_authority(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """E101/W103/E107: the development mode mints any token for anyone: never in production.

    It is also refused at run time (by the authority's development mode), since ASGI servers
    run no checks; W103 reports the explicit opt-in that lifts that. E107: the setting is on
    but no issuer app in this project registered itself to honour it.
    """
    configured = poppy_settings.DEV_AUTHORITY
    if not configured:
        return []
    if local_issuer.registered() is None:
        return [
            checks.Error(
                'POPPY["DEV_AUTHORITY"] is on but no issuer app mints its tokens.',
                hint='Add "poppy_django.authority" to INSTALLED_APPS (no extra needed for '
                "its development mode).",
                id="poppy_django.E107",
            )
        ]
    if debug_configured():
        return []
    if isinstance(configured, dict) and configured.get("ALLOW_WITHOUT_DEBUG") is True:
        return [
            checks.Warning(
                'POPPY["DEV_AUTHORITY"] runs with DEBUG=False (ALLOW_WITHOUT_DEBUG): anyone '
                "who can run manage.py poppy_token can act for any User.",
                hint="Only for measuring or trying production mode where no one else connects.",
                id="poppy_django.W103",
            )
        ]
    return [
        checks.Error(
            'POPPY["DEV_AUTHORITY"] is on with DEBUG=False: anyone who can run '
            "manage.py poppy_token can act for any User. It is refused at run time.",
            hint='Turn POPPY["DEV_AUTHORITY"] off and configure your issuer (ISSUER, TOKENS).',
            id="poppy_django.E101",
        )
    ]


def check_fake_verifier(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """E108/W104: the fake verifier (:mod:`poppy_django.verifier.fake`) trusts any header it
    is sent. It is also refused at run time with DEBUG off; W104 reports the explicit opt-in
    that lifts that (``ALLOW_FAKE_VERIFIER_WITHOUT_DEBUG``)."""
    configured = _configured_verifier()
    if debug_configured() or configured not in (FAKE_VERIFIER, fake.verify):
        return []
    if poppy_settings.ALLOW_FAKE_VERIFIER_WITHOUT_DEBUG:
        return [
            checks.Warning(
                'POPPY["AUTHENTICATE"] is the fake verifier with DEBUG=False, allowed by '
                'POPPY["ALLOW_FAKE_VERIFIER_WITHOUT_DEBUG"]: anyone who can reach the '
                "endpoint can act for any User.",
                hint="Only for tests of a production-mode deployment no one else reaches.",
                id="poppy_django.W104",
            )
        ]
    return [
        checks.Error(
            'POPPY["AUTHENTICATE"] is the fake verifier with DEBUG=False: it trusts any '
            "PoppyFake header, so anyone could act for any User. It is refused at run time.",
            hint='Use "poppy_django.verifier.dpop.verify" (or your own verifier) in production.',
            id="poppy_django.E108",
        )
    ]


def check_dpop_verifier(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """E102-E106, W101-W102: the default verifier's issuer, keys, algorithms and caches."""
    try:
        if not _uses_dpop_verifier():
            return []
    except ImproperlyConfigured:
        return []  # the core check reports an unimportable verifier
    errors: list[checks.CheckMessage] = []
    dev = bool(poppy_settings.raw("DEV_AUTHORITY"))
    if not poppy_settings.raw("ISSUER") and not dev:
        errors.append(
            checks.Error(
                'The DPoP verifier is configured without POPPY["ISSUER"].',
                hint="Set it to your Poppy authorization server's issuer URL.",
                id="poppy_django.E102",
            )
        )
    raw = poppy_settings.raw("TOKENS") or {}
    if not isinstance(raw, dict):
        return [*errors, checks.Error('POPPY["TOKENS"] must be a dict.', id="poppy_django.E105")]
    for name in ("ALGORITHMS", "DPOP_ALGORITHMS"):
        bad = refused_algorithms(raw.get(name))
        if bad:
            errors.append(
                checks.Error(
                    f'POPPY["TOKENS"]["{name}"] allows {", ".join(map(str, bad))}.',
                    hint="Only asymmetric algorithms: "
                    + ", ".join(sorted(ASYMMETRIC_ALGORITHMS))
                    + " (never none or HMAC).",
                    id="poppy_django.E103",
                )
            )
    own_issuer = local_issuer.registered() is not None  # its keys are checked locally
    if not raw.get("JWKS_URL") and not raw.get("JWKS") and not dev and not own_issuer:
        errors.append(
            checks.Error(
                "The DPoP verifier has no issuer keys.",
                hint='Set POPPY["TOKENS"]["JWKS_URL"] (or an inline "JWKS").',
                id="poppy_django.E104",
            )
        )
    if not any(e.id == "poppy_django.E103" for e in errors):
        try:
            options = poppy_settings.token_options
        except ImproperlyConfigured as exc:
            errors.append(checks.Error(str(exc), id="poppy_django.E105"))
        else:
            errors.extend(_cache_checks(options.replay_cache))
            url = options.jwks_url or ""
            if url.startswith("http://") and not debug_configured():
                errors.append(
                    checks.Warning(
                        "The issuer JWKS is fetched over plain http with DEBUG=False.",
                        hint="Use an https JWKS_URL.",
                        id="poppy_django.W102",
                    )
                )
    return errors


def _cache_checks(alias: str) -> list[checks.CheckMessage]:
    caches = getattr(settings, "CACHES", None) or {
        "default": {"BACKEND": _LOCAL_CACHE}  # Django's default
    }
    if alias not in caches:
        return [
            checks.Error(
                f'POPPY["TOKENS"]["REPLAY_CACHE"] names the cache {alias!r}, not in CACHES.',
                id="poppy_django.E106",
            )
        ]
    backend = caches[alias].get("BACKEND")
    if backend == _DUMMY_CACHE:
        return [
            checks.Error(
                f"The DPoP replay cache {alias!r} is a DummyCache: replayed proofs are accepted.",
                hint="Use Redis, Memcached or the database cache.",
                id="poppy_django.E106",
            )
        ]
    if backend == _LOCAL_CACHE and not debug_configured():
        return [
            checks.Warning(
                f"The DPoP replay cache {alias!r} is per process (LocMemCache): a proof "
                "replayed to another process is accepted.",
                hint="Use Redis or the database cache when several processes serve the endpoint.",
                id="poppy_django.W101",
            )
        ]
    return []
