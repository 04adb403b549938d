"""The development authority and ``manage.py poppy_token`` (design.md's exact contract)."""

from __future__ import annotations

import io
import time
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from django.core.management import CommandError, call_command
from django.test import Client

from poppy_django.auth import dev_authority, dpop
from poppy_django.client import DPoPKey
from tests.auth.support import BASE_URL, ENDPOINT_URL, request_info


@pytest.fixture
def dev(settings: Any, tmp_path: Path) -> Path:
    key_file = tmp_path / "var" / "dev-key.pem"
    settings.POPPY = {
        **settings.POPPY,
        "AUTHENTICATE": "poppy_django.auth.dpop.verify",
        "BASE_URL": BASE_URL,
        "ISSUER": None,
        "TOKENS": {},
        "DEV_AUTHORITY": {"KEY_FILE": str(key_file)},
    }
    yield key_file
    dpop.reset()


def poppy_token(*args: str) -> str:
    out = io.StringIO()
    call_command("poppy_token", *args, stdout=out)
    return out.getvalue().strip().splitlines()[-1]


def claims_of(token: str) -> dict[str, Any]:
    return jwt.decode(token, options={"verify_signature": False})


def verify(token: str, key: DPoPKey) -> Any:
    return dpop.verify(
        request_info(
            "POST", ENDPOINT_URL, token, key.proof("POST", ENDPOINT_URL, access_token=token)
        )
    )


def test_signed_out_token(dev: Path) -> None:
    key = DPoPKey()
    token = poppy_token("--user", "u1", "--jkt", key.thumbprint)
    principal = verify(token, key)
    assert (principal.user_id, principal.signed_in, principal.account_id) == ("u1", False, None)
    assert principal.client_id == dev_authority.DEFAULT_CLIENT_ID
    claims = claims_of(token)
    assert claims["iss"] == BASE_URL and claims["aud"] == ENDPOINT_URL
    assert claims["cnf"] == {"jkt": key.thumbprint} and claims["signed_in"] is False
    assert dev.exists()


def test_signed_in_token_with_scopes_client_and_ttl(dev: Path) -> None:
    key = DPoPKey()
    before = int(time.time())
    token = poppy_token(
        "--user",
        "u1",
        "--client-id",
        "https://pa.example/c",
        "--scope",
        "poppy:read",
        "--scope",
        "poppy:write",
        "--account",
        "acct-1",
        "--jkt",
        key.thumbprint,
        "--ttl",
        "120",
    )
    principal = verify(token, key)
    assert principal.signed_in and principal.account_id == "acct-1"
    assert principal.scopes == {"poppy:read", "poppy:write"}
    assert principal.client_id == "https://pa.example/c"
    claims = claims_of(token)
    assert before + 120 <= claims["exp"] <= claims["iat"] + 120


def test_token_is_bound_to_the_thumbprint(dev: Path) -> None:
    token = poppy_token("--user", "u1", "--jkt", DPoPKey().thumbprint)
    with pytest.raises(Exception) as caught:
        verify(token, DPoPKey())
    assert caught.value.error == "invalid_dpop_proof"


def test_the_key_is_shared_by_processes(dev: Path) -> None:
    """Every process reads the one key file; the first to create it wins."""
    first = dev_authority._create_or_read(dev)
    second = dev_authority._create_or_read(dev)
    assert first.private_numbers() == second.private_numbers()
    assert dev.stat().st_mode & 0o077 == 0  # not readable by others


def test_key_from_the_environment(dev: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    monkeypatch.setenv(dev_authority.ENV_KEY, pem)
    assert dev_authority.signing_key().private_numbers() == key.private_numbers()
    assert not dev.exists()


@pytest.mark.parametrize(
    "args",
    [
        ("--user", "u1"),  # no --jkt
        ("--jkt", "x" * 43),  # no --user
        ("--user", "u1", "--jkt", "not-a-thumbprint"),
        ("--user", "u1", "--jkt", "x" * 43, "--ttl", "0"),
    ],
)
def test_bad_arguments(dev: Path, args: tuple[str, ...]) -> None:
    with pytest.raises((CommandError, SystemExit)):
        call_command("poppy_token", *args, stdout=io.StringIO(), stderr=io.StringIO())


def test_refused_without_the_dev_authority(settings: Any) -> None:
    settings.POPPY = {**settings.POPPY, "DEV_AUTHORITY": False}
    with pytest.raises(CommandError):
        poppy_token("--user", "u1", "--jkt", DPoPKey().thumbprint)


@pytest.mark.urls("tests.auth.urls")
def test_jwks_view(dev: Path) -> None:
    response = Client().get("/.well-known/jwks.json")
    jwks = response.json()
    assert jwks == dev_authority.public_jwks()
    (entry,) = jwks["keys"]
    assert entry["kty"] == "EC" and "d" not in entry and entry["alg"] == "ES256"


def test_jwks_view_is_404_when_off(settings: Any) -> None:
    from django.test import RequestFactory

    settings.POPPY = {**settings.POPPY, "DEV_AUTHORITY": False}
    response = dev_authority.jwks_view(RequestFactory().get("/.well-known/jwks.json"))
    assert response.status_code == 404
