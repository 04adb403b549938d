"""Template filters for the desk's pages: its vocabulary (:mod:`poppy_django.desk.wording`)."""

from __future__ import annotations

from django import template

from poppy_django import service
from poppy_django.desk import wording
from poppy_django.models import Conversation

register = template.Library()


@register.filter
def desk_status(conversation: Conversation) -> str:
    """``{{ conversation|desk_status }}``: "waiting for a person", "with a person"…"""
    return wording.status_label(conversation.status, conversation.responder)


@register.filter
def desk_who(conversation: Conversation) -> str:
    """``{{ conversation|desk_who }}``: the account, else the pairwise User."""
    return wording.who(conversation.account_id, conversation.user_id)


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
