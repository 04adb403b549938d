"""The launcher's own promise (tests/multiprocess/cluster.py): a cluster's processes end with
it. The LLM-shaped model outlived test_observability's runs: a worker started under its name
took its place in the cluster's processes, and the stop at the end never signalled it."""

from __future__ import annotations

import contextlib
import signal
import threading
from pathlib import Path

import httpx
import pytest

from tests.multiprocess.cluster import cluster

pytestmark = pytest.mark.multiprocess


def _hang(origin: str, streaming: threading.Event) -> None:
    """A model call whose stream stops after its first token and never ends (``#hang``),
    until the model's stop cuts it."""
    request = {"model": "local", "stream": True, "messages": [{"role": "user", "content": "#hang"}]}
    with (
        contextlib.suppress(httpx.HTTPError),
        httpx.stream("POST", f"{origin}/v1/chat/completions", json=request, timeout=60) as answer,
    ):
        for _ in answer.iter_bytes():
            streaming.set()


def test_the_model_ends_with_the_cluster_on_sigterm(tmp_path: Path) -> None:
    streaming = threading.Event()
    with cluster(tmp_path) as mp:
        origin = mp.llm(ttft=0.05)
        model = mp.processes["llm"]
        # A second process under the model's name is refused, not put in its place.
        with pytest.raises(ValueError, match="'llm' names a process that runs"):
            mp.worker("llm")
        client = threading.Thread(target=_hang, args=(origin, streaming), daemon=True)
        client.start()
        assert streaming.wait(timeout=30), "the hung stream's first token"
    # The cluster's stop reached it, and SIGTERM ended it within the stop's grace (a SIGKILL
    # would say it did not), its hung stream cut.
    assert model.poll() == -signal.SIGTERM, model.poll()
    client.join(timeout=30)
    assert not client.is_alive()
