"""The authority's development mode and ``manage.py poppy_token`` (design.md's exact contract)."""

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

from poppy_django.authority import development, keys
from poppy_django.client import DPoPKey
from poppy_django.verifier import dpop
from tests.auth.support import BASE_URL, ENDPOINT_URL, request_info


@pytest.fixture
def dev(settings: Any, tmp_path: Path) -> Path:
    settings.DEBUG = True  # the development authority runs with DEBUG only
    key_file = tmp_path / "var" / "dev-key.pem"
    settings.POPPY = {
        **settings.POPPY,
        "AUTHENTICATE": "poppy_django.verifier.dpop.verify",
        "BASE_URL": BASE_URL,
        "ISSUER": None,
        "TOKENS": {},
        "DEV_AUTHORITY": {"KEY_FILE": str(key_file)},
        "SESSION_STATUS": None,  # revocation has its own tests (test_sessions.py)
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
    token = poppy_token("--user", "u1", f"--jkt={key.thumbprint}")
    principal = verify(token, key)
    assert (principal.user_id, principal.signed_in, principal.account_id) == ("u1", False, None)
    assert principal.client_id == development.DEFAULT_CLIENT_ID
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
        f"--jkt={key.thumbprint}",
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
    token = poppy_token("--user", "u1", f"--jkt={DPoPKey().thumbprint}")
    with pytest.raises(Exception) as caught:
        verify(token, DPoPKey())
    assert caught.value.error == "invalid_dpop_proof"


def test_the_key_is_shared_by_processes(dev: Path) -> None:
    """Every process reads the one key file; the first to create it wins."""
    first = keys.signing_key()
    second = keys.load_pem(dev.read_bytes(), str(dev))  # what another process reads
    assert first.private_numbers() == second.private_numbers()
    assert dev.stat().st_mode & 0o077 == 0  # not readable by others


def test_key_from_the_environment(dev: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    monkeypatch.setenv(development.ENV_KEY, pem)
    assert keys.signing_key().private_numbers() == key.private_numbers()
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
        poppy_token("--user", "u1", f"--jkt={DPoPKey().thumbprint}")


@pytest.mark.urls("tests.auth.urls")
def test_jwks_view(dev: Path) -> None:
    response = Client().get("/.well-known/jwks.json")
    jwks = response.json()
    assert jwks == keys.public_jwks()
    (entry,) = jwks["keys"]
    assert entry["kty"] == "EC" and "d" not in entry and entry["alg"] == "ES256"


def test_jwks_view_is_404_when_off(settings: Any) -> None:
    from django.test import RequestFactory

    from poppy_django.api.discovery import jwks_view

    settings.POPPY = {**settings.POPPY, "DEV_AUTHORITY": False}
    response = jwks_view(RequestFactory().get("/.well-known/jwks.json"))
    assert response.status_code == 404


def dashed_key() -> DPoPKey:
    """A key whose thumbprint starts with '-' (one in 64)."""
    while True:
        key = DPoPKey()
        if key.thumbprint.startswith("-"):
            return key


def test_a_thumbprint_starting_with_a_dash(dev: Path) -> None:
    key = dashed_key()
    token = poppy_token("--user", "u1", f"--jkt={key.thumbprint}")
    assert claims_of(token)["cnf"] == {"jkt": key.thumbprint}
    assert verify(token, key).user_id == "u1"


def test_url_names_the_audience_and_one_default_everywhere(settings: Any, dev: Path) -> None:
    from poppy_django.management.commands.poppy_chat import Command as PoppyChat

    key = DPoPKey()
    claims = claims_of(
        poppy_token("--user", "u1", f"--jkt={key.thumbprint}", "--url", "http://10.0.0.5:9000/x")
    )
    assert claims["aud"] == "http://10.0.0.5:9000/poppy/conversations"
    # Without BASE_URL: poppy_token, the issuer and poppy_chat agree on one origin.
    settings.POPPY = {**settings.POPPY, "BASE_URL": None}
    claims = claims_of(poppy_token("--user", "u1", f"--jkt={key.thumbprint}"))
    assert claims["iss"] == development.DEFAULT_ORIGIN == "http://127.0.0.1:8000"
    assert (
        claims["aud"] == PoppyChat()._default_url() == "http://127.0.0.1:8000/poppy/conversations"
    )
    with pytest.raises(CommandError):
        poppy_token("--user", "u1", f"--jkt={key.thumbprint}", "--url", "localhost:8000")


@pytest.mark.django_db
@pytest.mark.urls("tests.auth.urls")
def test_refused_at_run_time_without_debug(
    settings: Any, dev: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """No system check runs under uvicorn: DEBUG=False alone stops the authority."""
    key = DPoPKey()
    token = poppy_token("--user", "u1", f"--jkt={key.thumbprint}")
    settings.DEBUG = False
    dpop.reset()
    with pytest.raises(CommandError, match="ALLOW_WITHOUT_DEBUG"):
        poppy_token("--user", "u1", f"--jkt={key.thumbprint}")
    assert Client().get("/.well-known/jwks.json").status_code == 404
    response = Client().post(
        "/poppy/conversations",
        data={"message": {"id": "m1", "sender": "agent", "text": "hi"}},
        content_type="application/json",
        HTTP_AUTHORIZATION=f"DPoP {token}",
        HTTP_DPOP=key.proof("POST", ENDPOINT_URL, access_token=token),
    )
    # Not trusted: the verifier has no issuer keys, so there is no verifier (501, as with
    # none configured), and the log says why.
    assert response.status_code == 501 and response.json()["error"] == "not_implemented"
    assert any("ALLOW_WITHOUT_DEBUG" in r.getMessage() for r in caplog.records)
    from poppy_django.models import Conversation

    assert not Conversation.objects.exists()


def test_the_explicit_opt_in_runs_it_without_debug(settings: Any, dev: Path) -> None:
    settings.DEBUG = False
    settings.POPPY = {
        **settings.POPPY,
        "DEV_AUTHORITY": {"KEY_FILE": str(dev), "ALLOW_WITHOUT_DEBUG": True},
    }
    key = DPoPKey()
    assert verify(poppy_token("--user", "u1", f"--jkt={key.thumbprint}"), key).user_id == "u1"


def example_settings(tmp_path: Path, **env: str) -> dict[str, Any]:
    """The example project's settings in a fresh interpreter with this environment."""
    import json
    import os
    import subprocess
    import sys

    script = (
        "import json, example_project.settings as s; "
        "print(json.dumps({'DEBUG': s.DEBUG, 'SECRET_KEY': s.SECRET_KEY, "
        "'DEV': s.POPPY['DEV_AUTHORITY'], 'STATUS': s.POPPY['SESSION_STATUS']}))"
    )
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "POPPY_"))}
    clean.pop("REDIS_URL", None)
    result = subprocess.run(
        [sys.executable, "-c", script],
        env={**clean, "POPPY_VAR_DIR": str(tmp_path), **env},
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    return dict(json.loads(result.stdout.strip().splitlines()[-1]))


def test_example_project_production_mode(tmp_path: Path) -> None:
    production = {"REDIS_URL": "redis://127.0.0.1:6379/2"}
    found = example_settings(tmp_path, **production)
    # No debug pages, no published secret, no development authority by default.
    assert found["DEBUG"] is False and found["DEV"] is False
    # Sign-outs at the next request: the authority's status (development tokens included).
    assert found["STATUS"] == "poppy_django.authority.status.session_is_active"
    assert "not-secret" not in found["SECRET_KEY"] and len(found["SECRET_KEY"]) >= 50
    assert example_settings(tmp_path, **production)["SECRET_KEY"] == found["SECRET_KEY"]
    assert example_settings(tmp_path, DJANGO_DEBUG="0")["SECRET_KEY"] == found["SECRET_KEY"]
    given = example_settings(tmp_path, DJANGO_SECRET_KEY="s" * 60, **production)
    assert given["SECRET_KEY"] == "s" * 60
    # POPPY_DEV_AUTHORITY=1 is the explicit opt-in that keeps it with DJANGO_DEBUG=0.
    opted = example_settings(tmp_path, DJANGO_DEBUG="0", POPPY_DEV_AUTHORITY="1")
    assert opted["DEBUG"] is False and opted["DEV"]["ALLOW_WITHOUT_DEBUG"] is True
    assert opted["STATUS"] == "poppy_django.authority.status.session_is_active"
    # Embedded development: DEBUG on, the authority on (needing no opt-in).
    development = example_settings(tmp_path)
    assert development["DEBUG"] is True and development["DEV"]["ALLOW_WITHOUT_DEBUG"] is False
