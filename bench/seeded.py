"""What the in-process benches share: Django on the example project's settings, and a
conversation holding a few company messages, written through the service API (as staff's
are).

Used by ``bench/raw_rows.py`` and ``bench/read_and_window.py`` (run against a migrated
database named by ``DATABASE_URL``).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import django

if TYPE_CHECKING:
    from poppy_django.models import Conversation


def setup_django() -> None:
    """Django set up on the example project's settings (unless others are named)."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "example_project.settings")
    django.setup()


def conversation_with(messages: int) -> Conversation:
    """A new conversation holding ``messages`` company messages written by a person
    (:func:`poppy_django.service.post_message`), its row read back after."""
    from poppy_django import ids, service
    from poppy_django.models import Conversation

    conversation = Conversation.objects.create(
        id=ids.new_conversation_id(), client_id="bench-client", user_id="bench-user"
    )
    for index in range(messages):
        seen = service.get(conversation.pk).last_event_id
        service.post_message(
            conversation.pk, f"message {index}", by="bench", seen=seen, data={"index": index}
        )
    conversation.refresh_from_db()
    return conversation
