"""The company's side: the Python API the support desk (or your own code) calls on a
conversation. The personal agent's side, behind the endpoint, is
:mod:`poppy_django.service.conversations`.

Every function that changes a conversation works in one transaction under the
conversation's row lock, and accepts ``request_id`` (echoed on the events it causes, for the
desk's correlation; never shown to personal agents) and ``by`` (the staff member's username).
A refusal is a :class:`~poppy_django.errors.PoppyError` with a code of the one error table,
raised before anything is written.

**One owner.** A conversation handed to people is with at most one staff member, its
``assignee``: the holder once they joined, the teammate it is assigned to while it waits.
Joining one another staff member has is refused (``held_by_other``, naming them) unless it
is an explicit take-over (``take_over=True``: recorded for the desk, shown live to the one
it was taken from). A person's message needs the conversation: when no one has it, sending
joins it first, in the same transaction (the reply and the taking are one decision, so no
colleague can join between them, and a refused reply leaves nothing behind, not even a
join). It carries ``seen``, the id of the last event the staffer read: when anything was
written after it, the reply is refused (``conversation_changed``, with what ``arrived``) and
nothing is written. While a person holds the conversation the Company Agent writes nothing
(a turn in flight when they join ends without its reply).

>>> from poppy_django import service
>>> seen = service.get(conversation_id).last_event_id
>>> service.post_message(conversation_id, "Hi, I am Sam.", by="sam", seen=seen)
>>> service.human_left(conversation_id, by="sam")
"""

from poppy_django.service.assignment import (
    assign,
    handed_to_people,
    mine,
    transfer,
    unassign,
    unassigned,
    waiting,
)
from poppy_django.service.course import close, hand_off, handoff_unavailable, request_user
from poppy_django.service.desk_log import (
    MAX_NOTE,
    add_note,
    desk_events,
    log_event,
    tag,
    tags_of,
    untag,
)
from poppy_django.service.holding import (
    ARRIVED_SHOWN,
    human_joined,
    human_left,
    post_message,
    take_over,
)
from poppy_django.service.missed import followed_up, missed
from poppy_django.service.rerouting import to_team
from poppy_django.service.snapshot import ConversationState, get
from poppy_django.service.team import (
    available_staff,
    canned_replies,
    canned_reply,
    office_open,
    set_away,
    staff_seen,
    staff_status,
    team,
    teams_of,
)
from poppy_django.store.lifecycle import holder

__all__ = [
    "ARRIVED_SHOWN",
    "MAX_NOTE",
    "ConversationState",
    "add_note",
    "assign",
    "available_staff",
    "canned_replies",
    "canned_reply",
    "close",
    "desk_events",
    "followed_up",
    "get",
    "hand_off",
    "handed_to_people",
    "handoff_unavailable",
    "holder",
    "human_joined",
    "human_left",
    "log_event",
    "mine",
    "missed",
    "office_open",
    "post_message",
    "request_user",
    "set_away",
    "staff_seen",
    "staff_status",
    "tag",
    "tags_of",
    "take_over",
    "team",
    "teams_of",
    "to_team",
    "transfer",
    "unassign",
    "unassigned",
    "untag",
    "waiting",
]
