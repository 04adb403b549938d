"""Negotiation and settings: Operations are used only when both sides list version 1."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured

from example_project.shop.agent import cancel_order, store_hours
from poppy_django.authority.models import Client
from poppy_django.operations import options, service

pytestmark = pytest.mark.django_db

AGENT = "https://agent.example/client"


def listing(client_id: str) -> set[str]:
    return {"operations"} if client_id == AGENT else set()


def test_the_authoritys_stored_metadata_decides(settings: Any) -> None:
    assert not service.proposes(cancel_order, AGENT)  # unknown to the authority
    Client.objects.create(
        client_id=AGENT, metadata={"extensions": {"operations": {"version": "2"}}}
    )
    assert not service.proposes(cancel_order, AGENT)  # another major version
    Client.objects.filter(client_id=AGENT).update(
        metadata={"extensions": {"operations": {"version": "1"}}}
    )
    assert service.proposes(cancel_order, AGENT)
    assert not service.proposes(store_hours, AGENT)  # a read is never an operation


def test_a_hook_names_the_clients_extensions(settings: Any) -> None:
    settings.POPPY = {
        **settings.POPPY,
        "OPERATIONS": {
            "ENABLED": True,
            "CLIENT_EXTENSIONS": "tests.operations.test_negotiation.listing",
        },
    }
    assert service.proposes(cancel_order, AGENT)
    assert not service.proposes(cancel_order, "https://other.example/client")


def test_off_nothing_is_proposed(settings: Any) -> None:
    settings.POPPY = {**settings.POPPY, "OPERATIONS": {"CLIENT_EXTENSIONS": listing}}
    assert not service.proposes(cancel_order, AGENT)


@pytest.mark.parametrize(
    ("value", "named"),
    [
        ({"ENABLED": True, "LIFETIME": 5}, "LIFETIME"),
        ({"PROPOSE": "some"}, "PROPOSE"),
        ({"LIFETIME_SECONDS": 0}, "LIFETIME_SECONDS"),
        ({"CONFIRM_WAIT_SECONDS": "10"}, "CONFIRM_WAIT_SECONDS"),
    ],
)
def test_a_bad_option_names_itself(settings: Any, value: dict[str, Any], named: str) -> None:
    settings.POPPY = {**settings.POPPY, "OPERATIONS": value}
    with pytest.raises(ImproperlyConfigured, match=named):
        options.options()
