"""The operations tests' fixtures."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:  # at run time imported by the fixture: it needs the production extra
    from tests.ops.one_host import Host


@pytest.fixture
def host(tmp_path: Path) -> Iterator[Host]:
    """Processes of the example project sharing one multiprocess directory, as on a host
    (:mod:`tests.ops.one_host`), ended when the test ends. Imported here, not at the top:
    this conftest is loaded by the lane without extras too (``make noextras`` runs
    tests/ops/test_checks.py), which has no prometheus_client."""
    from tests.ops.one_host import Host

    with Host(tmp_path) as running:
        yield running
