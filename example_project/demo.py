"""``make demo``: a personal agent talks to Acme Outfitters over real HTTP, then stops.

The example project runs in embedded mode (SQLite, turns on in-process threads) under
uvicorn. A scripted personal agent with its own DPoP key gets Session Tokens from the
development authority (``manage.py poppy_token``), holds a conversation (a tool call, an
account-scope refusal, signing in, an action, a component) and closes it. The transcript is
printed as the personal agent sees it.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from poppy_django.client import DPoPKey, PoppyClient

ROOT = Path(__file__).resolve().parent.parent
USER = "demo-user-7f3a"


def manage(env: dict[str, str], *args: str) -> str:
    result = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        sys.exit(f"manage.py {' '.join(args)} failed:\n{result.stdout}{result.stderr}")
    return result.stdout


def mint(
    env: dict[str, str], key: DPoPKey, *, account: str | None = None, scopes: tuple[str, ...] = ()
) -> str:
    args = ["poppy_token", "--user", USER, f"--jkt={key.thumbprint}", "--ttl", "600"]
    if account:
        args += ["--account", account]
    for scope in scopes:
        args += ["--scope", scope]
    return manage(env, *args).strip().splitlines()[-1]


def port_in_use(port: int) -> bool:
    """Whether something already listens on 127.0.0.1:``port``."""
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def busy_port_message(port: int) -> str:
    return (
        f"Port {port} is already in use (another server, or an earlier demo still running): "
        f"choose another with make demo DEMO_PORT=<port> "
        f"(python -m example_project.demo --port <port>)."
    )


def wait_until_up(url: str, server: subprocess.Popen[bytes], log: Path, port: int) -> None:
    """Until our server answers ``poppy.json``; a server that exited (the port taken
    meanwhile) is told as such, never mistaken for whatever else answers there."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if server.poll() is not None:
            if "address already in use" in log.read_text().lower():
                sys.exit(busy_port_message(port))
            sys.exit(f"the server exited:\n{log.read_text()}")
        with contextlib.suppress(httpx.HTTPError):
            httpx.get(f"{url}/.well-known/poppy.json", timeout=1)
            if server.poll() is None:
                return
        time.sleep(0.2)
    sys.exit(f"the server did not start:\n{log.read_text()}")


class Transcript:
    """Prints each event once, as a person would read the conversation."""

    def __init__(self, client: PoppyClient, conversation_id: str) -> None:
        self.client = client
        self.conversation_id = conversation_id
        self.cursor: str | None = None

    def settle(self) -> None:
        """Print events until the Company is no longer working on a reply."""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            page = self.client.events(self.conversation_id, cursor=self.cursor, wait=10)
            self.cursor = page["cursor"]
            for event in page["events"]:
                show(event)
            if page["status"] != "working" and not page["has_more"]:
                return
        sys.exit("the Company did not answer in time")


def show(event: dict[str, Any]) -> None:
    kind = event["type"]
    if kind == "message":
        message = event["message"]
        who = "Personal agent" if message["role"] == "user" else f"Acme ({message['sender']})"
        print(f"  {who:>16} │ {message.get('text', '')}")
        data = message.get("data") or {}
        for action in data.get("actions", []):
            outcome = f"{action['tool']}: {action['status']} — {action['summary']}"
            print(f"  {'':>16} │   ↳ action {outcome}")
        for component in data.get("components", []):
            print(f"  {'':>16} │   ↳ component {component['name']} {component['props']}")
    elif kind == "state":
        print(f"  {'':>16} · {event['status']} ({event['responder']})")
    elif kind == "authorization":
        print(f"  {'':>16} ! authorization: {event['error']} (scope {event.get('scope', '-')})")
    else:
        print(f"  {'':>16} · {kind}")


def say(client: PoppyClient, transcript: Transcript, text: str) -> None:
    client.send(transcript.conversation_id, text)
    transcript.settle()


def converse(url: str, env: dict[str, str]) -> None:
    key = DPoPKey()
    print(f"\nPersonal agent's DPoP key thumbprint: {key.thumbprint}")
    discovery = httpx.get(f"{url}/.well-known/poppy.json", timeout=5).json()
    endpoint = discovery["agent"]["protocols"][0]["endpoint"]
    print(f"Discovered the conversation endpoint: {endpoint}\n")

    with PoppyClient(endpoint, mint(env, key), key=key) as client:
        print("— Signed out —")
        started = client.start("Hi! What are your opening hours?")
        transcript = Transcript(client, started["conversation_id"])
        transcript.settle()
        say(client, transcript, "Can you show my orders?")

        print("\n— The User signs in to acct-1 (read only) —")
        client.token = mint(env, key, account="acct-1", scopes=("poppy:read",))
        say(client, transcript, "Can you show my orders?")
        say(client, transcript, "Please cancel A-2")

        print("\n— The User grants poppy:write —")
        client.token = mint(env, key, account="acct-1", scopes=("poppy:read", "poppy:write"))
        say(client, transcript, "Please cancel A-2")
        say(client, transcript, "What is the status of A-1?")
        say(client, transcript, "#history")

        client.close(transcript.conversation_id)
        transcript.settle()
    print("\nThe conversation is closed. Demo complete.")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=8765)
    options = parser.parse_args()
    if port_in_use(options.port):
        sys.exit(busy_port_message(options.port))
    workdir = Path(tempfile.mkdtemp(prefix="poppy-demo-"))
    try:
        run(options.port, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def run(port: int, workdir: Path) -> None:
    url = f"http://127.0.0.1:{port}"
    env = {
        **{k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")},
        "POPPY_VAR_DIR": str(workdir),
        "POPPY_BASE_URL": url,
        "POPPY_LOG_LEVEL": "WARNING",
        "PYTHONPATH": str(ROOT),
        "DJANGO_SETTINGS_MODULE": "example_project.settings",
    }
    print(f"Embedded mode: SQLite in {workdir}, turns on in-process threads.")
    manage(env, "migrate", "-v0")
    log = workdir / "server.log"
    with open(log, "wb") as output:
        server = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "uvicorn",
                "example_project.asgi:application",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--no-access-log",
            ],
            env=env,
            cwd=ROOT,
            stdout=output,
            stderr=output,
        )
        try:
            wait_until_up(url, server, log, port)
            print(f"Acme Outfitters is up at {url}")
            converse(url, env)
        finally:
            server.terminate()
            server.wait(timeout=10)


if __name__ == "__main__":
    main()
