"""``manage.py poppy_chat``: chat with any Poppy endpoint from a terminal, as a personal agent.

``--url`` names the endpoint (default: this project's, from ``POPPY["BASE_URL"]``). With
``--token`` (or ``$POPPY_TOKEN``) the token must be bound to ``--key`` (a PEM of the DPoP key);
without one, the development authority of this project mints a token for a fresh key
(``--user``, ``--account``, ``--scope``). Lines starting with ``/`` are commands: ``/handoff``,
``/close``, ``/quit``. ``--message`` sends one message, prints the reply and exits.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError, CommandParser

from poppy_django.auth import dev_authority
from poppy_django.client import RESTING_STATES, DPoPKey, PoppyClient, PoppyClientError
from poppy_django.discovery import endpoint_url


class Command(BaseCommand):
    help = "Chat with a Poppy conversation endpoint as a personal agent."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--url", help="The endpoint URL (default: this project's).")
        parser.add_argument("--token", help="A DPoP-bound Session Token (or $POPPY_TOKEN).")
        parser.add_argument("--key", help="PEM file of the DPoP key the token is bound to.")
        parser.add_argument("--user", default="chat-user", help="Dev authority: the User.")
        parser.add_argument("--account", help="Dev authority: sign in as this account.")
        parser.add_argument("--scope", action="append", default=[], dest="scopes")
        parser.add_argument("--client-id", default=dev_authority.DEFAULT_CLIENT_ID)
        parser.add_argument("--conversation", help="Continue this conversation id.")
        parser.add_argument("--message", help="Send this one message, print the reply, exit.")
        parser.add_argument("--stream", action="store_true", help="Follow replies over SSE.")
        parser.add_argument("--insecure", action="store_true", help="Skip TLS verification.")
        parser.add_argument("--wait", type=float, default=30.0, help="Long-poll seconds.")

    def handle(self, *args: Any, **options: Any) -> None:
        url = options["url"] or self._default_url()
        key = self._key(options["key"])
        token = options["token"] or os.environ.get("POPPY_TOKEN")
        if not token:
            try:
                token = dev_authority.mint_token(
                    user=options["user"],
                    client_id=options["client_id"],
                    account=options["account"],
                    scopes=options["scopes"],
                    jkt=key.thumbprint,
                    audience=url,
                )
            except ImproperlyConfigured as exc:
                raise CommandError(f"Give --token: {exc}") from exc
        chat = _Chat(
            PoppyClient(url, token, key=key, verify=not options["insecure"]),
            self.stdout,
            stream=options["stream"],
            wait=options["wait"],
            conversation_id=options["conversation"],
        )
        try:
            if options["message"] is not None:
                chat.say(options["message"])
                return
            self.stdout.write(f"Talking to {url}. /handoff, /close, /quit.")
            for line in _lines(sys.stdin):
                if line in ("/quit", "/exit"):
                    break
                chat.command(line) if line.startswith("/") else chat.say(line)
        except PoppyClientError as exc:
            raise CommandError(str(exc)) from exc
        finally:
            chat.client.http.close()

    def _default_url(self) -> str:
        from poppy_django.conf import poppy_settings

        base = poppy_settings.BASE_URL or dev_authority.DEFAULT_ORIGIN
        return endpoint_url(base)

    def _key(self, path: str | None) -> DPoPKey:
        if not path:
            return DPoPKey()
        key = serialization.load_pem_private_key(Path(path).read_bytes(), password=None)
        if not isinstance(key, ec.EllipticCurvePrivateKey):
            raise CommandError("--key must be an EC P-256 private key (PEM).")
        return DPoPKey(key)


def _lines(stream: TextIO) -> Iterator[str]:
    while True:
        try:
            line = input("you> ") if stream.isatty() else stream.readline()
        except EOFError:
            return
        if not stream.isatty() and line == "":
            return
        line = line.strip()
        if line:
            yield line


class _Chat:
    """One conversation: sends, then shows events until the company side rests."""

    def __init__(
        self,
        client: PoppyClient,
        out: Any,
        *,
        stream: bool,
        wait: float,
        conversation_id: str | None,
    ) -> None:
        self.client = client
        self.out = out
        self.stream = stream
        self.wait = wait
        self.conversation_id = conversation_id
        self.cursor: str | None = None

    def say(self, text: str) -> None:
        if self.conversation_id is None:
            answer = self.client.start(text)
            self.conversation_id = str(answer["conversation_id"])
            self.out.write(f"[conversation {self.conversation_id}]")
        else:
            self.client.send(self.conversation_id, text)
        self.follow()

    def command(self, line: str) -> None:
        if self.conversation_id is None:
            self.out.write("No conversation yet: say something first.")
            return
        if line == "/handoff":
            answer = self.client.handoff(self.conversation_id)
        elif line == "/close":
            answer = self.client.close(self.conversation_id)
        else:
            self.out.write("Commands: /handoff, /close, /quit.")
            return
        self.out.write(f"[{answer.get('status')}/{answer.get('responder')}]")
        self.follow()

    def follow(self) -> None:
        assert self.conversation_id is not None
        if self.stream:
            self._follow_stream()
            return
        while True:
            page = self.client.events(self.conversation_id, self.cursor, self.wait)
            self.cursor = page.get("cursor") or self.cursor
            resting = False
            for event in page.get("events", []):
                state = self.show(event)
                resting = resting if state is None else state
            if resting or not page.get("events"):
                return

    def _follow_stream(self) -> None:
        assert self.conversation_id is not None
        streamed = ""  # the pieces of the reply printed so far
        for frame in self.client.stream(self.conversation_id, self.cursor, reconnect=False):
            if frame.event == "text-delta":
                piece = frame.json().get("text", "")
                self.out.write(piece, ending="")
                self.out.flush()
                streamed += piece
                continue
            if frame.id is not None:
                self.cursor = frame.id
            event = frame.json()
            if streamed and event.get("type") == "message":
                self.out.write("")
                # Deltas are a preview and may be partial (the stream opened mid-reply):
                # the complete message is what was said.
                complete = (event.get("message") or {}).get("text") or ""
                if complete != streamed:
                    self.show(event)
                streamed = ""
                continue
            if self.show(event):
                return

    def show(self, event: dict[str, Any]) -> bool | None:
        """Print one event; for a state, whether the company side rests (None: no state)."""
        kind = event.get("type")
        if kind == "message":
            message = event.get("message") or {}
            if message.get("role") == "company":
                text = message.get("text") or ""
                data = message.get("data")
                self.out.write(f"{message.get('sender', 'agent')}> {text}")
                if data:
                    self.out.write(f"  data: {json.dumps(data)}")
        elif kind == "state":
            return event.get("status") in RESTING_STATES
        elif kind == "authorization":
            scope = f" ({event['scope']})" if event.get("scope") else ""
            self.out.write(f"[{event.get('error')}{scope}: get a new token and continue]")
            return True
        elif kind:
            self.out.write(f"[{kind}: {json.dumps(event)}]")
        return None
