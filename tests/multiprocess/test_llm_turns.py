"""Production mode with the LLM-shaped local model: uvicorn, a Celery worker, real HTTP.

The worker's turns go through pydantic-ai's OpenAI chat model to tests/llm_endpoint.py in a
process of its own (``Cluster.llm``), as a deployment's workers reach a real provider.
"""

from __future__ import annotations

import threading
from typing import Any

import httpx
import pytest

from tests.agents import PersonalAgent, company_messages
from tests.multiprocess.cluster import Cluster

pytestmark = pytest.mark.multiprocess


def _settled(events: list[dict[str, Any]]) -> bool:
    return bool(events) and events[-1]["type"] == "state" and events[-1]["status"] == "idle"


def test_a_worker_answers_through_the_openai_compatible_endpoint(mp: Cluster) -> None:
    llm = mp.llm(ttft=0.1, tokens=6, rate=50)
    web = mp.web("web")
    mp.worker("worker")
    pa = PersonalAgent()
    talk = pa.at(web).post("", pa.message("hi")).json()["conversation_id"]
    pa.at(web).events_until(talk, _settled)
    cursor = pa.at(web).page(talk)["cursor"]

    # A reader listening before the message is sent gets every piece as it is written.
    opened = threading.Event()
    frames: list[tuple[str | None, dict[str, Any]]] = []

    def read() -> None:
        for name, _, data in pa.at(web).stream(talk, opened, **{"Last-Event-ID": cursor}):
            frames.append((name, data))
            if name is None and data["type"] == "state" and data["status"] == "idle":
                return

    reader = threading.Thread(target=read)
    reader.start()
    assert opened.wait(30)
    pa.at(web).post(f"/{talk}/messages", pa.message("hello there"))
    reader.join(60)
    answer = next(
        data["message"]
        for name, data in frames
        if name is None and data["type"] == "message" and data["message"]["role"] == "company"
    )
    deltas = [data["text"] for name, data in frames if name == "text-delta"]
    assert answer["text"] == "You said: hello there and here"
    assert "".join(deltas) == answer["text"]

    tool = pa.at(web).post("", pa.message("store_hours?")).json()["conversation_id"]
    (hours,) = company_messages(pa.at(web).events_until(tool, _settled))
    assert hours["text"].startswith("We are open Monday to Friday")
    served = httpx.get(f"{llm}/stats").json()
    assert (served["requests"], served["tool_calls"], served["open"]) == (4, 1, 0)
