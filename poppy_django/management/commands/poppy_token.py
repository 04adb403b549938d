"""``manage.py poppy_token``: mint a development Session Token (design.md's exact contract).

``--user U [--client-id C] [--scope S]... [--account A] --jkt THUMBPRINT [--ttl SECONDS]``
prints one DPoP-bound token on its last line: signed in with ``--account``, signed out
without; scopes count only when signed in. Needs ``POPPY["DEV_AUTHORITY"]``.
"""

from __future__ import annotations

import re
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError, CommandParser

from poppy_django.auth import dev_authority

#: An RFC 7638 SHA-256 thumbprint: 32 bytes, unpadded base64url.
THUMBPRINT_RE = re.compile(r"[A-Za-z0-9_-]{43}")


class Command(BaseCommand):
    help = "Print a DPoP-bound Session Token from the development authority."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--user", required=True, help="The pairwise User id (sub).")
        parser.add_argument(
            "--client-id",
            default=dev_authority.DEFAULT_CLIENT_ID,
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
            required=True,
            help="RFC 7638 thumbprint of the personal agent's DPoP public key.",
        )
        parser.add_argument("--ttl", type=int, default=3600, help="Lifetime in seconds.")

    def handle(self, *args: Any, **options: Any) -> None:
        if not THUMBPRINT_RE.fullmatch(options["jkt"]):
            raise CommandError("--jkt must be a SHA-256 JWK thumbprint (43 base64url characters).")
        if options["ttl"] <= 0:
            raise CommandError("--ttl must be a positive number of seconds.")
        if not options["user"] or (options["account"] is not None and not options["account"]):
            raise CommandError("--user and --account must not be empty.")
        scopes = [scope for value in options["scopes"] for scope in value.split()]
        try:
            token = dev_authority.mint_token(
                user=options["user"],
                client_id=options["client_id"],
                scopes=scopes,
                account=options["account"],
                jkt=options["jkt"],
                ttl=options["ttl"],
            )
        except ImproperlyConfigured as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(token)
