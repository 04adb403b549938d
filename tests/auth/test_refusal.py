"""An auth refusal is a PoppyError: one exception tree, one table of statuses."""

from __future__ import annotations

import json

import pytest

from poppy_django.errors import STATUS_OF, PoppyError
from poppy_django.verifier import AuthRefusal


@pytest.mark.parametrize(
    "code", ["invalid_token", "invalid_dpop_proof", "use_dpop_nonce", "sign_in_required"]
)
def test_a_refusal_is_a_poppy_error_with_the_wire_status(code):
    refusal = AuthRefusal(code, "why", headers={"DPoP-Nonce": "n1"})
    assert isinstance(refusal, PoppyError)
    assert refusal.status == STATUS_OF[code] and refusal.error == refusal.code == code
    response = refusal.response()
    assert response.status_code == STATUS_OF[code]
    assert json.loads(response.content) == {"error": code, "error_description": "why"}
    assert response["WWW-Authenticate"] == f'DPoP error="{code}"'
    assert response["DPoP-Nonce"] == "n1"
    assert response["Cache-Control"] == "no-store"


def test_a_refusal_outside_the_table_needs_its_status():
    with pytest.raises(ValueError, match="made_up"):
        AuthRefusal("made_up")
    assert AuthRefusal("made_up", status=401).response().status_code == 401
