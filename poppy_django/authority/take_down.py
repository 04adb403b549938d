"""Taking a personal agent (a client) down: what an operator does when one misbehaves.

One call blocks the client (no new Session, no token), revokes every sign-in it holds
(Account Tokens refused, signed-in Sessions signed out), ends its Sessions (their tokens are
refused at the next request on every process) and withdraws its open proposals (the
Operations extension's, through :mod:`poppy_django.agent.proposals`) with the operator's
reason as their outcome. The ``poppy_take_down_client`` management command and
the Client admin's "Take down" action call it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from django.db import transaction

from poppy_django.agent import proposals
from poppy_django.authority import grants
from poppy_django.authority.models import Client, Grant, Session
from poppy_django.authority.sessions import end_sessions

logger = logging.getLogger("poppy_django.authority")

DEFAULT_REASON = "Cancelled by the company: this personal agent was taken down."


@dataclass(frozen=True)
class TakenDown:
    """What a take-down ended."""

    clients: int
    sign_ins: int
    sessions: int
    operations: int


def take_down(client_ids: list[str], reason: str = DEFAULT_REASON) -> TakenDown:
    """Block ``client_ids`` and end everything they hold; unknown ids are skipped."""
    with transaction.atomic():
        clients = Client.objects.filter(client_id__in=client_ids)
        known = list(clients.values_list("client_id", flat=True))
        blocked = clients.update(status=Client.Status.BLOCKED)
        sign_ins = grants.revoke_grants(Grant.objects.filter(client__client_id__in=known))
        sessions = end_sessions(Session.objects.filter(client__client_id__in=known))
        cancelled = sum(proposals.withdraw_for_client(client_id, reason) for client_id in known)
    logger.warning(
        "Took down %s: %d sign-in(s), %d Session(s), %d proposal(s) ended",
        ", ".join(known) or "no known client",
        sign_ins,
        sessions,
        cancelled,
    )
    return TakenDown(blocked, sign_ins, sessions, cancelled)
