from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.multiprocess.cluster import Cluster, cluster


@pytest.fixture
def mp(tmp_path: Path) -> Iterator[Cluster]:
    """A fresh PostgreSQL database and Redis queue, with no process started yet."""
    with cluster(tmp_path) as running:
        yield running
