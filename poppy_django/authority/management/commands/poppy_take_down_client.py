"""``manage.py poppy_take_down_client CLIENT_ID... [--reason TEXT]``: block personal agents
and end their sign-ins, Sessions and open proposals (:mod:`poppy_django.authority.take_down`).
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from poppy_django.authority.take_down import DEFAULT_REASON, take_down


class Command(BaseCommand):
    help = "Block personal agents (client ids) and end their sign-ins, Sessions and proposals."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("client_ids", nargs="+", help="the clients' client_id URLs")
        parser.add_argument(
            "--reason",
            default=DEFAULT_REASON,
            help="what the agent reads on its cancelled proposals",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        reason = str(options["reason"]).strip()
        if not reason or "\x00" in reason or len(reason) > 500:
            raise CommandError("--reason is 1 to 500 characters, no NUL.")
        done = take_down(list(options["client_ids"]), reason)
        if not done.clients:
            raise CommandError("No such client: nothing was taken down.")
        self.stdout.write(
            f"Taken down: {done.clients} client(s), {done.sign_ins} sign-in(s) revoked, "
            f"{done.sessions} Session(s) ended, {done.operations} proposal(s) cancelled."
        )
