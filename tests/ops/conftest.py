"""The operations tests' fixtures."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.ops.one_host import Host


@pytest.fixture
def host(tmp_path: Path) -> Iterator[Host]:
    """Processes of the example project sharing one multiprocess directory, as on a host
    (:mod:`tests.ops.one_host`), ended when the test ends."""
    with Host(tmp_path) as running:
        yield running
