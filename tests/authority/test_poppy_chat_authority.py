"""``poppy_chat --authority``: a personal agent of the example project's own authorization
server, with no token from ``poppy_token`` — it pre-registers its client, starts a Session,
signs the User in with Device Sign-In (approved on the project's own pages) and reads the
account's orders. The example project as shipped, under uvicorn."""

from __future__ import annotations

import queue
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.device_page import approve_device_code
from tests.multiprocess.cluster import ROOT, cluster, free_port

pytestmark = [pytest.mark.multiprocess, pytest.mark.timeout(240)]

#: The example project's demo customer (shop/demo_accounts.py: ACME_DEMO_ACCOUNTS=1 below).
ACCOUNT, PASSWORD = "acct-1", "acme-demo"
DEMO = {"ACME_DEMO_ACCOUNTS": "1"}


def test_poppy_chat_signs_in_through_the_authority(tmp_path: Path) -> None:
    with cluster(tmp_path, env=DEMO) as running:
        running.env.pop("REDIS_URL")  # embedded: one web process answers the turns
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        running.env.update(
            POPPY_AUTHENTICATE="poppy_django.verifier.dpop.verify", POPPY_BASE_URL=base
        )
        running.web("web", port=port)
        chat = subprocess.Popen(
            [
                *[
                    sys.executable,
                    "manage.py",
                    "poppy_chat",
                    "--url",
                    f"{base}/poppy/conversations",
                ],
                *["--authority", "--register", "--client-id", "https://chat.example/agent"],
                *["--user", "usr_chat_walkthrough_0001", "--sign-in", "--scope", "poppy:read"],
                *["--message", "my orders please", "--timeout", "60"],
            ],
            cwd=ROOT,
            env=running.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        lines: queue.Queue[str] = queue.Queue()
        threading.Thread(
            target=lambda: [lines.put(line) for line in chat.stdout or ()], daemon=True
        ).start()
        seen: list[str] = []
        try:
            while not any("enter the code" in line for line in seen):
                seen.append(lines.get(timeout=60))
            code = re.search(r"enter the code (\S+)\]", seen[-1])
            assert code, seen
            approve_device_code(base, code.group(1), ACCOUNT, PASSWORD, "poppy:read")
            assert chat.wait(timeout=120) == 0, "".join(seen)
        finally:
            if chat.poll() is None:
                chat.kill()
        while not lines.empty():
            seen.append(lines.get())
        output = "".join(seen)
    assert "[registered https://chat.example/agent with this project's authority]" in output
    assert re.search(r"\[Session \S+ started at \S+, signed out\]", output), output
    assert "[signed in; scope: poppy:read]" in output, output
    replies = [line for line in seen if line.startswith("agent> ")]
    assert replies and "A-1" in replies[-1] and "B-1" not in replies[-1], output


def test_a_new_client_key_names_register_and_client_key(tmp_path: Path) -> None:
    """Registered once (the tutorial's run), then run again without --register: poppy_chat
    makes a new client key, which the authority refuses (invalid_client); it says what to do."""
    with cluster(tmp_path) as running:
        running.env.pop("REDIS_URL")
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        running.env.update(
            POPPY_AUTHENTICATE="poppy_django.verifier.dpop.verify", POPPY_BASE_URL=base
        )
        running.web("web", port=port)

        def chat(*extra: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [
                    *[
                        sys.executable,
                        "manage.py",
                        "poppy_chat",
                        "--url",
                        f"{base}/poppy/conversations",
                    ],
                    *["--authority", "--client-id", "https://chat.example/again", *extra],
                    *["--user", "usr_chat_again_0001", "--message", "hello", "--timeout", "60"],
                ],
                cwd=ROOT,
                env=running.env,
                capture_output=True,
                text=True,
                timeout=120,
            )

        registered = chat("--register")
        assert registered.returncode == 0, registered.stdout + registered.stderr
        again = chat()
    said = again.stdout + again.stderr
    assert again.returncode != 0
    assert "invalid_client" in said and "--register" in said and "--client-key" in said, said
