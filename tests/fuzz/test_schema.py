"""Schemathesis on the endpoint's OpenAPI document, against the running endpoint.

Schemathesis generates each operation's requests from ``/api/schema`` (valid ones, and
ones that break the document's constraints); an auth hook signs every request with a fresh
DPoP proof for the development authority's Session Token; path ids are mostly real
conversations so cases get past 404. Every answer must pass the harness's checks (no 5xx,
JSON errors with ``error``, refusals and reads write nothing) and schemathesis's own:
the status, content type, headers and body are what the document says. The bounded run
sends ``POPPY_FUZZ_EXAMPLES`` (default 30) cases per operation and generation mode; the
long run is ``POPPY_FUZZ_PROFILE=long`` (see docs/fuzzing.md).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode

from tests.agents import PersonalAgent
from tests.fuzz.harness import PROFILE, Answer, check, credential_headers, rows
from tests.fuzz.strategies import Credentials, mostly
from tests.fuzz.test_endpoint import Target

pytestmark = pytest.mark.timeout(900)

OPENAPI_JSON = "application/vnd.oai.openapi+json"

#: Schemathesis's checks of an answer against the document (none re-sends the request, so
#: the row counts around each case stay exact).
DOCUMENT_CHECKS = [
    schemathesis.checks.not_a_server_error,
    schemathesis.checks.status_code_conformance,
    schemathesis.checks.content_type_conformance,
    schemathesis.checks.response_headers_conformance,
    schemathesis.checks.response_schema_conformance,
]

OPERATIONS = [
    "POST /poppy/conversations",
    "POST /poppy/conversations/{conversation_id}/messages",
    "GET /poppy/conversations/{conversation_id}/events",
    "POST /poppy/conversations/{conversation_id}/handoff",
    "POST /poppy/conversations/{conversation_id}/close",
]


def load_schema(base_url: str, caller: PersonalAgent) -> Any:
    """The served document, its requests signed as ``caller``."""
    document = httpx.get(f"{base_url}/api/schema", headers={"Accept": OPENAPI_JSON}).json()
    schema = schemathesis.openapi.from_dict(document)

    @schema.auth(refresh_interval=None)
    class SignEachRequest:
        """The Session Token once; a fresh proof for each request's method and URL."""

        def get(self, case: schemathesis.Case, context: schemathesis.AuthContext) -> PersonalAgent:
            return caller

        def set(
            self, case: schemathesis.Case, data: PersonalAgent, context: schemathesis.AuthContext
        ) -> None:
            url = base_url + case.formatted_path
            for name, value in credential_headers(data, case.method, url, Credentials("valid")):
                case.headers[name.decode()] = value.decode()

    return schema


@pytest.mark.parametrize("label", OPERATIONS)
def test_fuzz_from_the_openapi_document(live: str, label: str) -> None:
    target = Target(live)
    schema = load_schema(live, target.caller)
    operation = schema[label.split()[1]][label.split()[0]]
    statuses: Counter[int] = Counter()

    def cases(mode: GenerationMode) -> st.SearchStrategy[schemathesis.Case]:
        if "{conversation_id}" not in label:
            return operation.as_strategy(generation_mode=mode)
        others = st.sampled_from([target.foreign_id, None])  # None: the document's own
        return mostly(st.just(target.conversation_id), others, tenths=7).flatmap(
            lambda conversation_id: operation.as_strategy(
                generation_mode=mode,
                path_parameters={"conversation_id": conversation_id} if conversation_id else None,
            )
        )

    @settings(settings.get_profile(PROFILE))
    @given(case=cases(GenerationMode.POSITIVE) | cases(GenerationMode.NEGATIVE))
    def case(case: schemathesis.Case) -> None:
        before = rows()
        response = case.call(base_url=live, timeout=30)
        statuses[response.status_code] += 1
        content_type = (response.headers.get("content-type") or [""])[0]
        answer = Answer(case.method, response.status_code, content_type, response.content)
        check(answer, before, writes=case.method == "POST", how=Credentials("valid"))
        case.validate_response(response, checks=DOCUMENT_CHECKS)

    case()
    print(f"\n{label}: {sum(statuses.values())} cases, statuses {dict(sorted(statuses.items()))}")
    assert any(status not in (400, 401, 403) for status in statuses), statuses
