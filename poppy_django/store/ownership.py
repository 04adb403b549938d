"""Whose a conversation is: every read and write of the endpoint checks it first.

Another personal agent, User or account gets the same ``404 conversation_not_found`` as an
unknown id; a signed-out User on an account's conversation is asked to sign in.
"""

from __future__ import annotations

from collections.abc import Callable

from poppy_django import ids
from poppy_django.errors import PoppyError
from poppy_django.models import Conversation
from poppy_django.store import event_log
from poppy_django.verifier import Principal


def sign_in_required() -> PoppyError:
    return PoppyError(
        "sign_in_required",
        "This conversation belongs to an account: sign in to continue it.",
        headers={"WWW-Authenticate": 'DPoP error="sign_in_required"'},
    )


def check_owner(principal: Principal, conversation: Conversation) -> None:
    """Another personal agent, User or account sees the same 404 as an unknown id."""
    if (conversation.client_id, conversation.user_id) != (principal.client_id, principal.user_id):
        raise PoppyError("conversation_not_found")
    if conversation.account_id is not None:
        if not principal.signed_in:
            raise sign_in_required()
        if principal.account_id != conversation.account_id:
            raise PoppyError("conversation_not_found")


#: The columns :func:`check_owner` reads.
OWNER_FIELDS = ("client_id", "user_id", "account_id")


def get_owned(
    principal: Principal, conversation_id: str, *, for_update: bool = False
) -> Conversation:
    """The conversation if ``principal`` owns it (row-locked with ``for_update``)."""
    return owned(principal, conversation_id, event_log.lock if for_update else _whole_row)


def owned(
    principal: Principal, conversation_id: str, read: Callable[[str], Conversation]
) -> Conversation:
    """What ``read`` returns for the conversation, if the id is well formed and ``principal``
    owns it (``read`` raises ``conversation_not_found`` for a missing one)."""
    if not ids.is_valid_id(conversation_id):
        raise PoppyError("conversation_not_found")
    conversation = read(conversation_id)
    check_owner(principal, conversation)
    return conversation


def _whole_row(conversation_id: str) -> Conversation:
    try:
        return Conversation.objects.get(pk=conversation_id)
    except Conversation.DoesNotExist as exc:
        raise PoppyError("conversation_not_found") from exc


__all__ = ["OWNER_FIELDS", "check_owner", "get_owned", "owned", "sign_in_required"]
