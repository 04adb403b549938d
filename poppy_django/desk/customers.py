"""Who the customer is, for staff: their name, and their other conversations.

The name is the one canned replies' ``{name}`` placeholder says
(``POPPY["CANNED_REPLY_VALUES"]``: by default what the personal agent put in the context;
a project whose accounts carry names points the setting at a function that reads them), so
the queue, the alerts, the page's title and a reply all name the customer alike.
"""

from __future__ import annotations

from django.db.models import Q, QuerySet

from poppy_django.conf import poppy_settings
from poppy_django.models import Conversation
from poppy_django.staff.canned import CannedReplyValues

#: The longest name shown (a context may hold anything): longer ones are cut.
NAME_LIMIT = 60
#: How many of the customer's other conversations a conversation's page lists.
EARLIER_SHOWN = 10


def name(conversation: Conversation) -> str:
    """The customer's name, as the canned replies' ``{name}`` says it; "" when unknown."""
    values_of: CannedReplyValues | None = poppy_settings.CANNED_REPLY_VALUES
    found = values_of(conversation).get("name") if values_of is not None else None
    if not isinstance(found, str):
        return ""
    words = " ".join(found.split())
    return words if len(words) <= NAME_LIMIT else words[: NAME_LIMIT - 1].rstrip() + "…"


def same_customer(conversation: Conversation) -> Q:
    """The conversations of the same customer: the same User of the same personal agent
    (the pairwise id is per personal agent) or, once signed in, the same account."""
    same = Q(client_id=conversation.client_id, user_id=conversation.user_id)
    if conversation.account_id:
        same |= Q(account_id=conversation.account_id)
    return same


def others(conversation: Conversation) -> QuerySet[Conversation]:
    """The customer's other conversations, newest first (its own Direct Conversations and
    the one it was opened from are linked on the page already)."""
    return (
        Conversation.objects.filter(same_customer(conversation))
        .exclude(pk=conversation.pk)
        .exclude(parent_id=conversation.pk)
        .exclude(pk=conversation.parent_id or "")
        .order_by("-created_at", "-pk")
    )
