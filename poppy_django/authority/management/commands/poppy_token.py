"""``manage.py poppy_token``: mint a development Session Token (design.md's exact contract).

``--user U [--client-id C] [--scope S]... [--account A] --jkt=THUMBPRINT [--ttl SECONDS]
[--url URL] [--session SID]`` prints one DPoP-bound token on its last line: signed in with
``--account``, signed out without; scopes count only when signed in. Pass the thumbprint as
``--jkt=THUMBPRINT``: one in 64 starts with ``-``, which a separate argument would turn into
an option. ``--revoke SID`` ends a session instead. Needs the authority's development mode
(``POPPY["DEV_AUTHORITY"]``); it works without the authority's extra (Authlib, httpx).
"""

from __future__ import annotations

import re
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError, CommandParser

from poppy_django.authority import development
from poppy_django.authority.tokens import mint_development_token

#: An RFC 7638 SHA-256 thumbprint: 32 bytes, unpadded base64url.
THUMBPRINT_RE = re.compile(r"[A-Za-z0-9_-]{43}")
#: A session id: the id alphabet, as long as the verifier accepts.
SESSION_RE = re.compile(r"[A-Za-z0-9_-]{1,256}")


class Command(BaseCommand):
    help = "Print a DPoP-bound Session Token from the development authority, or revoke a session."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--user", help="The pairwise User id (sub).")
        parser.add_argument(
            "--client-id",
            default=development.DEFAULT_CLIENT_ID,
            help="The personal agent's client_id.",
        )
        parser.add_argument(
            "--scope",
            action="append",
            default=[],
            dest="scopes",
            help="A scope (repeatable); counts only when signed in.",
        )
        parser.add_argument("--account", help="Sign in as this account (else signed out).")
        parser.add_argument(
            "--jkt",
            help="RFC 7638 thumbprint of the personal agent's DPoP public key; write "
            "--jkt=THUMBPRINT (a thumbprint may start with '-').",
        )
        parser.add_argument("--ttl", type=int, default=3600, help="Lifetime in seconds.")
        parser.add_argument(
            "--url",
            help="The server's public URL (its origin is used) the token is for; default: "
            f"POPPY['BASE_URL'], else {development.DEFAULT_ORIGIN}.",
        )
        parser.add_argument("--session", help="The session id (sid); default: a new one.")
        parser.add_argument(
            "--revoke",
            metavar="SESSION_ID",
            help="Revoke this session (its tokens are refused) instead of minting a token.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            if options["revoke"] is not None:
                self._revoke(options["revoke"])
            else:
                self._mint(options)
        except ImproperlyConfigured as exc:
            raise CommandError(str(exc)) from exc

    def _revoke(self, session_id: str) -> None:
        if not SESSION_RE.fullmatch(session_id):
            raise CommandError("--revoke takes a session id ([A-Za-z0-9_-], 1-256 characters).")
        if development.revoke(session_id):
            self.stdout.write(f"Revoked session {session_id}.")
        else:
            self.stdout.write(f"Session {session_id} was already revoked.")

    def _mint(self, options: dict[str, Any]) -> None:
        if not options["user"] or not options["jkt"]:
            raise CommandError("--user and --jkt=THUMBPRINT are required to mint a token.")
        if not THUMBPRINT_RE.fullmatch(options["jkt"]):
            raise CommandError("--jkt must be a SHA-256 JWK thumbprint (43 base64url characters).")
        if options["ttl"] <= 0:
            raise CommandError("--ttl must be a positive number of seconds.")
        if options["account"] is not None and not options["account"]:
            raise CommandError("--account must not be empty.")
        session = options["session"]
        if session is not None and not SESSION_RE.fullmatch(session):
            raise CommandError("--session takes a session id ([A-Za-z0-9_-], 1-256 characters).")
        url = options["url"]
        if url is not None and not re.match(r"https?://[^/?#]+", url):
            raise CommandError("--url must be an http(s) URL, e.g. http://127.0.0.1:8000.")
        scopes = [scope for value in options["scopes"] for scope in value.split()]
        token = mint_development_token(
            user=options["user"],
            client_id=options["client_id"],
            scopes=scopes,
            account=options["account"],
            jkt=options["jkt"],
            ttl=options["ttl"],
            audience=development.default_audience(url),
            session=session,
        )
        self.stdout.write(token)
