"""Where the authority's signing key comes from, and the JWKS the verifier is given."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured

from poppy_django.authority import keys


def test_a_key_file_and_its_public_jwks(acme_settings: Any) -> None:
    path = acme_settings.POPPY_AUTHORITY["SIGNING_KEY_FILE"]
    jwks = keys.public_jwks()
    assert jwks == keys.jwks_of_file(path) == acme_settings.POPPY["TOKENS"]["JWKS"]
    assert [(k["kty"], k["crv"], k["alg"]) for k in jwks["keys"]] == [("EC", "P-256", "ES256")]
    assert "d" not in jwks["keys"][0]


def test_development_mode_signs_with_its_generated_key(settings: Any, tmp_path: Path) -> None:
    settings.DEBUG = True
    dev_key = tmp_path / "dev.pem"
    settings.POPPY = {**settings.POPPY, "DEV_AUTHORITY": {"KEY_FILE": str(dev_key)}}
    settings.POPPY_AUTHORITY = {}
    assert keys.public_jwks() == keys.jwks_of_file(dev_key)  # made on first use


def test_one_key_for_the_token_endpoint_poppy_token_and_the_verifier(
    settings: Any, tmp_path: Path, monkeypatch: Any
) -> None:
    """A deployment's key wins over development mode's: one key signs, one JWKS verifies."""
    from poppy_django.verifier import dpop, local_issuer

    monkeypatch.delenv(keys.ENV_KEY, raising=False)
    deployment_key = tmp_path / "deployment.pem"
    deployment_key.write_bytes(keys.new_pem())
    settings.DEBUG = True
    settings.POPPY = {
        **settings.POPPY,
        "TOKENS": {},
        "DEV_AUTHORITY": {"KEY_FILE": str(tmp_path / "dev.pem")},
    }
    settings.POPPY_AUTHORITY = {"SIGNING_KEY_FILE": str(deployment_key)}
    local = local_issuer.issuing()
    assert local is not None
    assert keys.public_jwks() == keys.jwks_of_file(deployment_key) == local.public_jwks()
    source = dpop.key_source(settings_token_options())
    (deployment,) = keys.jwks_of_file(deployment_key)["keys"]
    assert source.key(deployment["kid"], "ES256") is not None
    assert not (tmp_path / "dev.pem").exists()


def settings_token_options() -> Any:
    from poppy_django.conf import poppy_settings

    return poppy_settings.token_options


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
        authority_settings().SESSION_TOKEN_SECONDS  # noqa: B018 (reading a key parses the dict)
