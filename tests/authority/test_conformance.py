"""The protocol's public conformance suite against the example project and its authority."""

from __future__ import annotations

import asyncio
import json

import pytest
from personal_agent_protocol.conformance import (
    ConformanceContext,
    Scenario,
    run_conformance,
    select_cases,
)

from tests.authority.conftest import ORIGIN, World

pytestmark = pytest.mark.django_db(transaction=True)

#: The shop: signed-in reads of orders need poppy:read (tests/authority/urls.py).
SCENARIO = Scenario(
    read_path="/api/orders",
    read_scope="poppy:read",
    scopes=("poppy:read", "poppy:write"),
    account_prompt="What are my orders?",
    greeting="Hello.",
)


def test_conformance(world: World, customers: None) -> None:
    context = ConformanceContext(
        ORIGIN,
        identity=world.atlas,
        http=world.http,
        driver=world.user,
        scenario=SCENARIO,
        address_resolver=world.network.resolve,
    )
    cases = [c for c in select_cases() if c.suite != "operations"]
    report = asyncio.run(run_conformance(context, cases=cases))
    print(json.dumps(report.to_json()["summary"]))
    for result in report.results:
        print(result.outcome, result.id, result.message)
