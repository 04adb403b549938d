"""Discovery: the protocols entry and poppy.json from settings, served at /.well-known."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import Client

from poppy_django.api import discovery


def test_protocol_entry_from_base_url(settings: Any) -> None:
    settings.POPPY = {**settings.POPPY, "BASE_URL": "https://api.acme.com/ignored/path"}
    assert discovery.protocol_entry() == {
        "type": "poppy",
        "endpoint": "https://api.acme.com/poppy/conversations",
    }


def test_protocol_entry_needs_an_origin(settings: Any) -> None:
    settings.POPPY = {**settings.POPPY, "BASE_URL": None}
    with pytest.raises(ImproperlyConfigured):
        discovery.protocol_entry()


def test_document_from_settings(settings: Any) -> None:
    # Another server is the issuer: the project does not run poppy_django.authority.
    settings.INSTALLED_APPS = [a for a in settings.INSTALLED_APPS if a != "poppy_django.authority"]
    settings.POPPY = {
        **settings.POPPY,
        "BASE_URL": "https://api.acme.com",
        "ISSUER": "https://auth.acme.com",
        "DISCOVERY": {
            "ORGANIZATION": {"name": "Acme Outfitters"},
            "AUTH": {"registration": "dynamic"},
            "EXTRA": {"docs": "https://acme.com/poppy"},
        },
    }
    assert discovery.poppy_document() == {
        "protocol_version": "0.2",
        "organization": {"name": "Acme Outfitters", "domain": "api.acme.com"},
        "auth": {"issuer": "https://auth.acme.com", "registration": "dynamic"},
        "agent": {
            "protocols": [{"type": "poppy", "endpoint": "https://api.acme.com/poppy/conversations"}]
        },
        "docs": "https://acme.com/poppy",
        # The example project takes feedback reports (POPPY["FEEDBACK"]), offers its MCP
        # server (docs/mcp.md) and the Operations extension (docs/operations-extension.md).
        "feedback": {"endpoint": "https://api.acme.com/poppy/feedback"},
        "apis": [
            {
                "type": "mcp",
                "url": "https://api.acme.com/poppy/mcp",
                "resource": "https://api.acme.com/poppy/mcp",
                "description": "The Company Agent's tools over MCP (Streamable HTTP).",
            }
        ],
        "extensions": {
            "operations": {"version": "1", "endpoint": "https://api.acme.com/poppy/operations"}
        },
    }


def test_discovery_lists_neither_extension_nor_mcp_when_off(settings: Any) -> None:
    settings.POPPY = {
        **settings.POPPY,
        "BASE_URL": "https://a.example",
        "OPERATIONS": {},
        "MCP": {},
    }
    document = discovery.poppy_document()
    assert "extensions" not in document
    assert [api["type"] for api in document["apis"]] == ["openapi"]  # no MCP server


def test_unknown_discovery_key_is_named(settings: Any) -> None:
    settings.POPPY = {**settings.POPPY, "BASE_URL": "https://a.example", "DISCOVERY": {"ORG": {}}}
    with pytest.raises(ImproperlyConfigured, match="ORG"):
        discovery.poppy_document()


@pytest.mark.urls("tests.auth.urls")
def test_view_uses_the_request_origin_and_dev_issuer(settings: Any) -> None:
    settings.DEBUG = True  # the development authority runs with DEBUG only
    settings.POPPY = {**settings.POPPY, "BASE_URL": None, "ISSUER": None, "DEV_AUTHORITY": True}
    response = Client().get("/.well-known/poppy.json", HTTP_HOST="localhost:8765")
    assert response.status_code == 200
    assert response["Access-Control-Allow-Origin"] == "*"
    document = response.json()
    assert document["agent"]["protocols"] == [
        {"type": "poppy", "endpoint": "http://localhost:8765/poppy/conversations"}
    ]
    assert document["auth"]["issuer"] == "http://127.0.0.1:8000"
    assert document["auth"]["jwks_uri"] == "http://localhost:8765/.well-known/jwks.json"


@pytest.mark.urls("tests.auth.urls")
def test_https_issuer_upgrades_the_endpoint(settings: Any) -> None:
    settings.POPPY = {**settings.POPPY, "BASE_URL": None, "ISSUER": "https://auth.acme.com"}
    document = Client().get("/.well-known/poppy.json", HTTP_HOST="localhost").json()
    assert document["agent"]["protocols"][0]["endpoint"] == "https://localhost/poppy/conversations"
