"""Template filters for the desk's pages: its vocabulary (:mod:`poppy_django.desk.wording`)."""

from __future__ import annotations

from django import template
from django.utils import timezone

from poppy_django import service
from poppy_django.desk import missed, wording
from poppy_django.models import Conversation, Status

register = template.Library()


@register.filter
def desk_status(conversation: Conversation) -> str:
    """``{{ conversation|desk_status }}``: "waiting for a person", "with a person"…"""
    return wording.status_label(conversation.status, conversation.responder)


@register.filter
def desk_who(conversation: Conversation) -> str:
    """``{{ conversation|desk_who }}``: the customer's name, else the account, else the
    pairwise User."""
    return wording.who(conversation)


@register.filter
def desk_why(conversation: Conversation) -> str:
    """``{{ conversation|desk_why }}``: why a person is needed (the customer, or the agent)."""
    return wording.why(conversation)


@register.filter
def desk_holder(conversation: Conversation) -> str:
    """``{{ conversation|desk_holder }}``: whom it is with (holder, or assigned while waiting)."""
    return service.holder(conversation)


@register.filter
def first_words(text: object) -> str:
    """``{{ text|first_words }}``: the start of a message, cut at a word."""
    return wording.first_words(text)


@register.filter
def desk_duration(seconds: float | None) -> str:
    """``{{ seconds|desk_duration }}``: "45 s", "3 min 20 s", "2 h 5 min"; "—" for none."""
    if seconds is None:
        return "—"
    whole = round(seconds)
    if whole < 60:
        return f"{whole} s"
    minutes, rest = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes} min {rest} s" if rest else f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min" if minutes else f"{hours} h"


@register.filter
def desk_percent(share: float | None) -> str:
    """``{{ share|desk_percent }}``: 0.75 as "75 %"; "—" for none."""
    return "—" if share is None else f"{round(share * 100)} %"


@register.filter
def desk_missed(conversation: Conversation) -> str:
    """``{{ row|desk_missed }}``: why and when its customer got nobody ("" if not missed)."""
    found = missed.of_row(conversation)
    return str(found) if found else ""


@register.filter
def desk_goes_back(conversation: Conversation) -> str:
    """``{{ row|desk_goes_back }}``: when a waiting handoff past its warning goes back to the
    Company Agent ("" before the warning, or with no maximum wait)."""
    if conversation.status != Status.QUEUED:
        return ""
    found = missed.deadline(conversation.handoff_requested_at)
    if found is None or not found.warning():
        return ""
    return f"goes back to the Company Agent at {timezone.localtime(found.due_at):%H:%M:%S}"
