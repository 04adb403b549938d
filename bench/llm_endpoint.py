"""Serve the LLM-shaped local model (tests/llm_endpoint.py) in a process of its own.

    .venv/bin/python bench/llm_endpoint.py [--port 0] [--ttft 0.5] [--tokens 20] [--rate 20]

Prints ``OPENAI_BASE_URL=http://127.0.0.1:<port>/v1`` once it listens (port 0: a free port
the OS picks), then serves until SIGINT/SIGTERM. Point a project at it with
``POPPY_MODEL=openai-chat:local OPENAI_BASE_URL=<that URL> OPENAI_API_KEY=local``; see
docs/agent.md ("A local OpenAI-compatible model"). ``GET /stats`` on the same origin counts
the model calls in flight.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.llm_endpoint import LlmEndpoint, Pace, uvicorn_server  # noqa: E402
from tests.threaded_server import listening_socket  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0: a free port")
    parser.add_argument("--ttft", type=float, default=0.5, help="seconds to the first token")
    parser.add_argument("--tokens", type=int, default=20, help="tokens (words) per answer")
    parser.add_argument("--rate", type=float, default=20.0, help="tokens per second")
    parser.add_argument("--retry-after", type=float, default=1.0, help="a 429's Retry-After")
    args = parser.parse_args()
    app = LlmEndpoint(Pace(args.ttft, args.tokens, args.rate), retry_after=args.retry_after)
    sock = listening_socket(args.port, args.host)
    host, port = sock.getsockname()[:2]
    print(f"OPENAI_BASE_URL=http://{host}:{port}/v1", flush=True)
    uvicorn_server(app).run(sockets=[sock])


if __name__ == "__main__":
    main()
