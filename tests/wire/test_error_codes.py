"""Every error code the package answers is in ``poppy_django.errors.ERRORS``, with its status.

Two ways: the package's source, read for every code it names where an answer is made
(``error_response``, ``PoppyError`` and the refusals that become one), and the example
project's routes, asked wrong in every way that needs no script (each method, broken bodies,
unknown ids, bad queries; signed out, signed in, and with a real conversation), every JSON
error answered checked against the table (a setting the test settings leave out may make a
route fail: that is the setup checks' business, not this test's). The issuer's OAuth
endpoints answer OAuth's own codes (RFC 6749 §5.2, from Authlib's error classes): those are
checked against that registry.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from authlib.oauth2 import OAuth2Error
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

import poppy_django
from poppy_django.authority import errors as authority_errors
from poppy_django.errors import ERRORS, PoppyError, error_response
from tests.agents import PersonalAgent

PACKAGE = Path(poppy_django.__file__).parent
#: The calls whose first argument is the code answered: the table's two ways in, and the
#: refusals the verifier, Mediated Sign-In and the browser channel answer through them.
ANSWERING = {"error_response", "PoppyError", "AuthRefusal", "MediatedRefused", "BrowserRefused"}
#: The issuer's OAuth endpoints (the token endpoint's family): their errors are OAuth's.
OAUTH_PATHS = ("/oauth/",)


def _named_codes() -> Iterator[tuple[str, str, str]]:
    """``(code, call, file)`` for every code literally named where the package answers."""
    for path in sorted(PACKAGE.rglob("*.py")):
        if "migrations" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call) and node.args:
                func = node.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                first = node.args[0]
                if name in ANSWERING and isinstance(first, ast.Constant):
                    yield str(first.value), name, str(path.relative_to(PACKAGE))
            if isinstance(node, ast.Dict):
                for key, value in zip(node.keys, node.values, strict=True):
                    if (
                        isinstance(key, ast.Constant)
                        and key.value == "error"
                        and isinstance(value, ast.Constant)
                        and path.name != "signin_client.py"  # a client reading a company's answer
                    ):
                        yield str(value.value), "{'error': ...}", str(path.relative_to(PACKAGE))


def test_every_code_the_package_names_is_in_the_table() -> None:
    named = list(_named_codes())
    # The scan sees every way in (a renamed one would leave the test reading nothing).
    assert {call for _, call, _ in named} >= ANSWERING
    outside = sorted({(code, call, where) for code, call, where in named if code not in ERRORS})
    assert outside == []


def test_the_middlewares_status_codes_are_in_the_table() -> None:
    from poppy_django.api.middleware import _CODE_OF_STATUS

    assert all(ERRORS[code].status == status for status, code in _CODE_OF_STATUS.items())


def test_a_code_answers_with_its_tables_status() -> None:
    for code, error in ERRORS.items():
        assert PoppyError(code).response().status_code == error.status
        assert error_response(code).status_code == error.status


def _oauth_codes() -> set[str]:
    """Every ``error`` an OAuth error class can answer: Authlib's and the issuer's own."""
    found: set[str] = set()
    todo: list[type[OAuth2Error]] = [OAuth2Error]
    import authlib.oauth2.rfc6749.errors  # noqa: F401  (the RFCs' classes, loaded)
    import authlib.oauth2.rfc8628.errors  # noqa: F401

    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if isinstance(getattr(cls, "error", None), str):
            found.add(cls.error)
    assert {"invalid_grant", "invalid_client"} <= found
    assert authority_errors.AccountMismatchError.error in found
    return found


def _sample_paths() -> list[str]:
    """One concrete path for every route of the example project but the admin's, the static
    files' and the OpenAPI document's: each variable part an id that names nothing."""

    def walk(patterns: list[Any], prefix: str) -> Iterator[str]:
        for pattern in patterns:
            route = prefix + _route(str(pattern.pattern))
            if isinstance(pattern, URLResolver):
                yield from walk(pattern.url_patterns, route)
            elif isinstance(pattern, URLPattern):
                yield route

    paths = {"/" + route for route in walk(get_resolver().url_patterns, "")}
    skipped = ("/admin/", "/static/", "/api/schema")  # staff pages, files, a document
    return sorted(p for p in paths if not p.startswith(skipped))


def _route(pattern: str) -> str:
    pattern = pattern.lstrip("^").rstrip("$")
    pattern = re.sub(r"\(\?P<\w+>[^)]*\)", "nothing_here", pattern)
    pattern = re.sub(r"<(?:\w+:)?\w+>", "nothing_here", pattern)
    pattern = pattern.replace("(?:/.*)?", "").replace(".*", "nothing_here")
    return pattern.replace("\\", "")


BODIES: list[bytes | None] = [None, b"{", b"[]", b"{}", json.dumps({"message": 5}).encode()]
QUERIES = ["", "?cursor=nope&wait=x&limit=-1", "?cursor=999999999"]


def _answers(agent: PersonalAgent, paths: list[str]) -> Iterator[tuple[str, str, Any]]:
    assert agent.client is not None
    for path in paths:
        for query in QUERIES:
            for method in ("get", "delete", "put"):
                yield (
                    method,
                    path + query,
                    getattr(agent.client, method)(path + query, secure=True, **agent.headers()),
                )
        for body in BODIES:
            yield (
                "post",
                path,
                agent.client.post(
                    path,
                    data=body or b"",
                    content_type="application/json",
                    secure=True,
                    **agent.headers(),
                ),
            )


@pytest.mark.django_db
def test_no_route_answers_a_code_outside_the_table(shop_orders: None, settings: Any) -> None:
    settings.POPPY = {**settings.POPPY, "ISSUER": "https://testserver"}  # the issuer's routes
    oauth = _oauth_codes()
    signed_out = PersonalAgent()
    signed_in = PersonalAgent(account_id="acct-1", scopes=("poppy:read", "poppy:write"))
    for agent in (signed_out, signed_in):  # a route's failure is its answer, not a raise here
        agent.client = Client(raise_request_exception=False)
    started = signed_in.start(None, context={"page": "home"})
    assert started.status_code == 201
    conversation_id = started.json()["conversation_id"]
    paths = _sample_paths()
    assert "/poppy/conversations/nothing_here/messages" in paths and "/poppy/mcp" in paths
    real = [p.replace("nothing_here", conversation_id) for p in paths if "conversations/" in p]

    seen: dict[str, set[str]] = {}
    outside: list[tuple[str, str, int, str]] = []
    for agent, tried in ((signed_out, paths), (signed_in, paths + real)):
        for method, path, response in _answers(agent, tried):
            if response.status_code < 400:
                continue
            if not response.get("Content-Type", "").startswith("application/json"):
                continue
            code = response.json().get("error")
            allowed = oauth | set(ERRORS) if path.startswith(OAUTH_PATHS) else set(ERRORS)
            seen.setdefault(code, set()).add(path)
            if code not in allowed:
                outside.append((method, path, response.status_code, code))
            elif code in ERRORS and not path.startswith(OAUTH_PATHS):
                assert response.status_code == ERRORS[code].status, (method, path, code)
    assert outside == []
    # The routes were reached deep enough to refuse in many ways, not only at the door.
    assert {"invalid_token", "not_found", "method_not_allowed", "invalid_request"} <= set(seen)
    assert {"invalid_cursor", "cursor_expired", "conversation_not_found"} & set(seen)
