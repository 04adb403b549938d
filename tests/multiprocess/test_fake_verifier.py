"""The fake verifier is refused at run time in production mode unless the deployment opts in
by name (issue 51, R7): the example project as shipped (uvicorn, a Celery worker, DEBUG off,
PostgreSQL, Redis) with ``POPPY_AUTHENTICATE`` naming the fake verifier.

Without ``POPPY_ALLOW_FAKE_VERIFIER=1`` a forged ``PoppyFake`` header signed in to acct-1
starts no conversation, so it reads no order (uvicorn runs no system check: only the run-time
refusal stands); with it, the same deployment is what every multi-process test runs on.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from poppy_django.verifier.fake import REFUSED_WITHOUT_DEBUG, fake_authorization
from tests.multiprocess.cluster import Cluster
from tests.waiting import eventually

pytestmark = pytest.mark.multiprocess

FORGED = {
    "Authorization": fake_authorization(
        "https://forger.example/agent", "usr_forger", account_id="acct-1", scopes=["poppy:read"]
    )
}


def _ask_for_orders(web: str) -> httpx.Response:
    return httpx.post(
        f"{web}/poppy/conversations",
        json={"message": {"id": "m-forged-1", "sender": "agent", "text": "my orders"}},
        headers=FORGED,
        timeout=30,
    )


def _said(web: str, conversation_id: str) -> str | None:
    """The Company Agent's reply, once its turn is done."""
    read: dict[str, Any] = httpx.get(
        f"{web}/poppy/conversations/{conversation_id}/events?wait=5", headers=FORGED, timeout=30
    ).json()
    if read["status"] != "idle":
        return None
    return " ".join(e["message"].get("text", "") for e in read["events"] if e["type"] == "message")


def test_a_forged_header_is_refused_without_the_opt_in_and_honoured_with_it(
    mp: Cluster,
) -> None:
    refusing = mp.web("refusing", env={"POPPY_ALLOW_FAKE_VERIFIER": "0"})
    refused = _ask_for_orders(refusing)
    assert refused.status_code == 401, refused.text
    assert refused.json() == {"error": "invalid_token", "error_description": REFUSED_WITHOUT_DEBUG}
    assert REFUSED_WITHOUT_DEBUG in mp.log("refusing")

    # The documented test path: the same deployment with the explicit opt-in.
    mp.worker("worker")
    opted_in = mp.web("opted-in")
    started = _ask_for_orders(opted_in)
    assert started.status_code == 201, started.text
    said = eventually(
        lambda: _said(opted_in, started.json()["conversation_id"]), what="the orders reply"
    )
    assert "A-1" in said
