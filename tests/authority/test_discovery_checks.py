"""poppy.json and the OAuth metadata as served, judged by the rules personal agents apply:
checks E301/E302 (``DEBUG`` off) name the field and the fix; an http issuer is never a
500."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from poppy_django.checks.discovery import check_discovery
from tests.authority.sdk_agent import DOMAIN, ORIGIN

API = {"type": "openapi", "url": "/api/schema", "description": "Your orders."}


def problems(settings: Any) -> list[tuple[str, str, str]]:
    return [(p.id, p.msg, p.hint) for p in check_discovery()]


def discovery(settings: Any, **options: Any) -> None:
    settings.POPPY = {
        **settings.POPPY,
        "DISCOVERY": {**settings.POPPY["DISCOVERY"], **options},
    }


def test_the_documents_as_configured_pass(acme_settings: Any) -> None:
    discovery(acme_settings, APIS=[API])
    assert problems(acme_settings) == []


def test_an_api_without_its_description_is_named_with_the_fix(acme_settings: Any) -> None:
    discovery(acme_settings, APIS=[{"type": "openapi", "url": "/api/schema"}])
    [(id_, message, hint)] = problems(acme_settings)
    assert id_ == "poppy_django.E301"
    assert "apis.0.description" in message and ORIGIN in message
    assert 'POPPY["DISCOVERY"]["APIS"][0]' in hint


def test_a_version_and_a_domain_agents_refuse(acme_settings: Any) -> None:
    discovery(
        acme_settings,
        PROTOCOL_VERSION="0.1",
        ORGANIZATION={"name": "Acme", "domain": "other.example"},
    )
    found = problems(acme_settings)
    fields = [message.split(": ")[1] for _, message, _ in found]
    assert {"protocol_version", "organization.domain"} <= set(fields), found
    assert {id_ for id_, _, _ in found} >= {"poppy_django.E301"}


def test_metadata_that_does_not_list_the_domain_is_e302(acme_settings: Any) -> None:
    acme_settings.POPPY_AUTHORITY = {**acme_settings.POPPY_AUTHORITY, "DOMAINS": ["else.example"]}
    [(id_, message, hint)] = problems(acme_settings)
    assert id_ == "poppy_django.E302" and "poppy_domains" in message
    assert 'POPPY_AUTHORITY["DOMAINS"]' in hint


def test_http_is_refused_without_debug_and_development_is_not_stopped(
    acme_settings: Any,
) -> None:
    acme_settings.POPPY = {
        **acme_settings.POPPY,
        "BASE_URL": f"http://{DOMAIN}",
        "ISSUER": f"http://{DOMAIN}",
    }
    acme_settings.DEBUG = False
    found = problems(acme_settings)
    assert {id_ for id_, _, _ in found} == {"poppy_django.E301", "poppy_django.E302"}
    assert any("auth.issuer" in message and "not https" in message for _, message, _ in found)
    assert all("BASE_URL" in hint for _, _, hint in found)
    acme_settings.DEBUG = True
    assert problems(acme_settings) == []


@pytest.mark.django_db
def test_metadata_over_http_is_served_in_development_and_refused_clearly_without(
    acme_settings: Any,
) -> None:
    acme_settings.POPPY = {
        **acme_settings.POPPY,
        "BASE_URL": f"http://{DOMAIN}",
        "ISSUER": f"http://{DOMAIN}",
    }
    acme_settings.DEBUG = True
    served = Client().get("/.well-known/oauth-authorization-server", HTTP_HOST=DOMAIN)
    assert served.status_code == 200 and served.json()["issuer"] == f"http://{DOMAIN}"
    acme_settings.DEBUG = False
    refused = Client().get("/.well-known/oauth-authorization-server", HTTP_HOST=DOMAIN)
    assert refused.status_code == 404
    body = json.loads(refused.content)
    assert body["error"] == "not_found" and "https" in body["error_description"]


@pytest.mark.parametrize(
    "apis",
    [[API], [{"type": "openapi", "url": "/api/schema"}], [{**API, "url": "http://x.example/s"}]],
)
def test_the_rules_agree_with_the_public_sdks_models(acme_settings: Any, apis: Any) -> None:
    """The SDK (a test dependency) accepts exactly the documents the rules pass."""
    from personal_agent_protocol.models import DiscoveryDocument, OAuthServerMetadata
    from pydantic import ValidationError

    from poppy_django.api.discovery import poppy_document
    from poppy_django.api.discovery_rules import discovery_problems, metadata_problems
    from poppy_django.authority.metadata import metadata_document

    discovery(acme_settings, APIS=apis)
    document = poppy_document(None)
    ours = discovery_problems(document, DOMAIN)
    try:
        DiscoveryDocument.model_validate(document)
    except ValidationError as refused:
        theirs = {".".join(map(str, error["loc"])) for error in refused.errors()}
        assert theirs and {problem.field for problem in ours} == theirs
    else:
        assert ours == []
    OAuthServerMetadata.model_validate(metadata_document(None))
    assert metadata_problems(metadata_document(None), document) == []


@pytest.mark.parametrize("host", ["localhost", "bakery.localhost"])
def test_the_loopbacks_names_are_dns_names(acme_settings: Any, host: str) -> None:
    """RFC 6761: production mode tried on one's own machine over TLS (docs/deployment.md)."""
    origin = f"https://{host}:8443"
    acme_settings.POPPY = {
        **acme_settings.POPPY,
        "BASE_URL": origin,
        "ISSUER": origin,
        "DISCOVERY": {**acme_settings.POPPY["DISCOVERY"], "APIS": [API]},
    }
    acme_settings.POPPY_AUTHORITY = {**acme_settings.POPPY_AUTHORITY, "DOMAINS": [host]}
    discovery(acme_settings, ORGANIZATION={"name": "The Bakery", "domain": host})
    assert problems(acme_settings) == []


def test_a_single_label_name_is_still_refused(acme_settings: Any) -> None:
    discovery(acme_settings, APIS=[API], ORGANIZATION={"name": "Acme", "domain": "intranet"})
    found = [message for _, message, _ in problems(acme_settings)]
    assert any("'intranet' is not a DNS name" in message for message in found), found
