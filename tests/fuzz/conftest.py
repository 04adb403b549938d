"""The fuzz campaigns' fixtures: the running endpoint, and the desk's (a signed-in desk user)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from example_project.asgi import application
from poppy_django.verifier import dpop
from tests.desk.conftest import desk, desk_user  # noqa: F401 - fixtures used by name
from tests.threaded_server import serve
from tests.turn_control import dispatch_lost


@pytest.fixture
def live(transactional_db: None, settings: Any, tmp_path: Path) -> Iterator[str]:
    """The example project under uvicorn, with the production verifier and no turns run,
    neither dispatched nor taken up by the recovery sweep once the lost dispatch's lease
    runs out (a turn's writes would blur what each request wrote)."""
    with serve(application, log_level="critical") as base_url:
        settings.POPPY = {
            **settings.POPPY,
            "AUTHENTICATE": "poppy_django.verifier.dpop.verify",
            "BASE_URL": base_url,
            "ISSUER": None,
            "TOKENS": {},
            # The production verifier, with DEBUG off: the authority runs by explicit opt-in.
            "DEV_AUTHORITY": {"KEY_FILE": str(tmp_path / "key.pem"), "ALLOW_WITHOUT_DEBUG": True},
            # Long-polls at the cap would make each case wait; the cap itself is the wire's.
            "WAIT_MAX_SECONDS": 0.05,
            "SWEEP_SECONDS": None,
            # At the default rates one caller's campaign would be mostly 429s after its first
            # 30 starts; the throttles have their own tests (tests/wire/test_limits.py).
            "THROTTLE_RATES": {"conversation_start": None, "message": None},
        }
        dpop.reset()
        with dispatch_lost():
            yield base_url
        dpop.reset()
