"""Fixtures: the DPoP verifier configured against a test issuer with an inline JWKS."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from poppy_django.client import DPoPKey
from poppy_django.verifier import dpop
from tests.auth.support import BASE_URL, ISSUER, Issuer


@pytest.fixture
def issuer() -> Issuer:
    return Issuer()


@pytest.fixture
def pa_key() -> DPoPKey:
    """The personal agent's DPoP key."""
    return DPoPKey()


def dpop_poppy(settings: Any, issuer: Issuer, **tokens: Any) -> dict[str, Any]:
    poppy = {
        **settings.POPPY,
        "AUTHENTICATE": "poppy_django.verifier.dpop.verify",
        "ISSUER": ISSUER,
        "BASE_URL": BASE_URL,
        "TOKENS": {"JWKS": issuer.jwks, **tokens},
        "SESSION_STATUS": None,  # the session seam has its own tests (test_sessions.py)
    }
    settings.POPPY = poppy
    return poppy


@pytest.fixture
def dpop_settings(settings: Any, issuer: Issuer) -> Iterator[Issuer]:
    """POPPY configured for the DPoP verifier and ``issuer``; yields the issuer."""
    dpop_poppy(settings, issuer)
    yield issuer
    dpop.reset()
