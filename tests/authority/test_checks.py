"""The authority's system checks, each one."""

from __future__ import annotations

from typing import Any

from poppy_django.authority.checks import check_authority


def ids(settings: Any) -> list[str]:
    return [problem.id for problem in check_authority()]


def test_a_configured_authority_has_no_errors(acme_settings: Any) -> None:
    acme_settings.POPPY = {**acme_settings.POPPY, "SESSION_STATUS": None}
    assert ids(acme_settings) == ["poppy_authority.W002"]
    acme_settings.POPPY = {
        **acme_settings.POPPY,
        "SESSION_STATUS": "poppy_django.authority.status.session_is_active",
    }
    assert ids(acme_settings) == []


def test_unknown_settings_no_issuer_no_key_and_http(acme_settings: Any, monkeypatch: Any) -> None:
    acme_settings.POPPY_AUTHORITY = {"TYPO": 1}
    assert ids(acme_settings) == ["poppy_authority.E001"]
    acme_settings.POPPY_AUTHORITY = {"SIGNING_KEY_FILE": "/nonexistent/key.pem"}
    acme_settings.POPPY = {**acme_settings.POPPY, "ISSUER": None, "DEV_AUTHORITY": False}
    found = ids(acme_settings)
    assert "poppy_authority.E002" in found and "poppy_authority.E003" in found
    acme_settings.POPPY = {**acme_settings.POPPY, "ISSUER": "http://acme.example"}
    acme_settings.DEBUG = True  # development over http is fine
    assert "poppy_authority.W001" not in ids(acme_settings)
    acme_settings.DEBUG = False
    assert "poppy_authority.W001" in ids(acme_settings)


def test_the_channels_checks(acme_settings: Any) -> None:
    acme_settings.POPPY = {
        **acme_settings.POPPY,
        "SESSION_STATUS": "poppy_django.authority.status.session_is_active",
    }
    assert ids(acme_settings) == []  # the example's channels, as shipped
    middleware = list(acme_settings.MIDDLEWARE)
    acme_settings.MIDDLEWARE = [
        m for m in middleware if m != "poppy_django.authority.website.BrowserSessionMiddleware"
    ]
    assert ids(acme_settings) == ["poppy_authority.E004"]
    acme_settings.MIDDLEWARE = ["poppy_django.authority.website.BrowserSessionMiddleware"] + [
        m for m in middleware if m != "poppy_django.authority.website.BrowserSessionMiddleware"
    ]
    assert ids(acme_settings) == ["poppy_authority.E004"]  # before the session middleware
    acme_settings.MIDDLEWARE = middleware
    acme_settings.DEBUG, acme_settings.SESSION_COOKIE_SECURE = False, False
    assert ids(acme_settings) == ["poppy_authority.W003"]
    acme_settings.SESSION_COOKIE_SECURE = True
    authority = acme_settings.POPPY_AUTHORITY
    acme_settings.POPPY_AUTHORITY = {**authority, "ACCOUNT_ID": "builtins.str"}
    assert ids(acme_settings) == ["poppy_authority.W004"]
    acme_settings.POPPY_AUTHORITY = {**authority, "MEDIATED_FIELDS": ["password"]}
    assert ids(acme_settings) == ["poppy_authority.E005"]
    acme_settings.POPPY_AUTHORITY = {**authority, "BROWSER_SESSIONS": False}
    acme_settings.MIDDLEWARE = []
    assert "poppy_authority.E004" not in ids(acme_settings)
