"""The authority's own tests: the example project as its issuer at ``acme.example``, through
Django's test client, with personal agents' sites from :mod:`tests.authority.network`.

``world`` (:class:`tests.authority.sdk_agent.World`) gives an unmodified
``personal-agent-protocol`` personal agent (Atlas) reaching the company by its domain over
the SDK's in-process network (the channel and fuzz tests). The
interop tests (``test_conformance``, ``test_sdk_end_to_end``) do not use these settings: they
run the example project as shipped (:mod:`tests.authority.shipped`).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from django.core.cache import caches

from poppy_django import process_cache
from poppy_django.authority.keys import jwks_of_file
from poppy_django.verifier import dpop
from tests.authority import network
from tests.authority.driver import PASSWORD
from tests.authority.sdk_agent import DOMAIN, ORIGIN, World


@pytest.fixture
def acme_settings(settings: Any, tmp_path: Path) -> Any:
    """The example project as its own issuer at https://acme.example, configured as in
    production: its own signing key, and the endpoint verifying with the public half."""
    key_file = tmp_path / "signing-key.pem"
    key_file.write_bytes(
        ec.generate_private_key(ec.SECP256R1()).private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    settings.DEBUG = False  # production, whatever tests.settings says (not only the runner)
    settings.ALLOWED_HOSTS = [DOMAIN, "testserver"]
    settings.POPPY = {
        **settings.POPPY,
        "BASE_URL": ORIGIN,
        "ISSUER": ORIGIN,
        "AUTHENTICATE": "poppy_django.verifier.dpop.verify",
        "TOKENS": {"JWKS": jwks_of_file(key_file)},
        "DEV_AUTHORITY": False,
        "DISCOVERY": {"ORGANIZATION": {"name": "Acme Outfitters", "domain": DOMAIN}},
    }
    # Served at https://acme.example: what POPPY_BASE_URL=https://... makes the example set.
    settings.SESSION_COOKIE_SECURE = settings.CSRF_COOKIE_SECURE = True
    settings.POPPY_AUTHORITY = {
        **settings.POPPY_AUTHORITY,  # the example's channels, as shipped
        "SIGNING_KEY_FILE": str(key_file),
        "FETCH_TRANSPORT": "tests.authority.network.transport",
        "RESOLVER": "tests.authority.network.resolve",
        "DEVICE_INTERVAL_SECONDS": 1,
    }
    dpop.reset()
    return settings


@pytest.fixture
def customers(django_user_model: Any) -> None:
    """The Users of acct-1 and acct-2, who log in on Acme's own page."""
    for account in ("acct-1", "acct-2"):
        user, _ = django_user_model.objects.get_or_create(username=account)
        user.set_password(PASSWORD)
        user.save()


@pytest.fixture(autouse=True)
def _sites() -> Iterator[None]:
    """No site, and nothing the authority remembers in its cache (failed clients, fetch and
    guess counts), carried from one test to the next."""
    network.reset()
    caches["default"].clear()
    yield
    network.reset()
    process_cache.forget()


@pytest.fixture
def world(acme_settings: Any) -> World:
    return World()
