"""Where the authority's signing key comes from, and the JWKS the verifier is given."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured

from poppy_django.auth import dev_authority
from poppy_django.authority import keys


def test_a_key_file_and_its_public_jwks(acme_settings: Any) -> None:
    path = acme_settings.POPPY_AUTHORITY["SIGNING_KEY_FILE"]
    jwks = keys.public_jwks()
    assert jwks == keys.jwks_of_file(path) == acme_settings.POPPY["TOKENS"]["JWKS"]
    assert [(k["kty"], k["crv"], k["alg"]) for k in jwks["keys"]] == [("EC", "P-256", "ES256")]
    assert "d" not in jwks["keys"][0]


def test_development_mode_signs_with_the_development_authoritys_key(
    settings: Any, tmp_path: Path
) -> None:
    settings.DEBUG = True
    settings.POPPY = {**settings.POPPY, "DEV_AUTHORITY": {"KEY_FILE": str(tmp_path / "dev.pem")}}
    settings.POPPY_AUTHORITY = {}
    assert keys.public_jwks() == dev_authority.public_jwks()


def test_without_a_key_it_says_what_to_set(settings: Any, monkeypatch: Any) -> None:
    monkeypatch.delenv(keys.ENV_KEY, raising=False)
    settings.POPPY = {**settings.POPPY, "DEV_AUTHORITY": False}
    settings.POPPY_AUTHORITY = {}
    with pytest.raises(ImproperlyConfigured, match="SIGNING_KEY_FILE"):
        keys.signing_key()


def test_unknown_settings_are_named(settings: Any) -> None:
    from poppy_django.authority.conf import authority_settings

    settings.POPPY_AUTHORITY = {"SIGNING_KEY": "x"}
    with pytest.raises(ImproperlyConfigured, match="SIGNING_KEY"):
        authority_settings()
