"""Bulk actions on the admin's Conversation list: assign, tag, close.

Each conversation goes through :mod:`poppy_django.service` on its own (its own transaction,
its own row lock), as if a person had pressed the button on its page: one owner holds
(closing a conversation a teammate has is refused), and every change sends its live events
to the desk, which a bulk ``queryset.update()`` would skip (django-celery-beat's admin redoes
those side effects by hand after its bulk updates; here there are none to redo). What was
refused is listed by conversation, with why.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from django import forms

from poppy_django import service
from poppy_django.errors import PoppyError
from poppy_django.store import tags

#: The most conversations one bulk action handles (the admin's list pages hold 100).
MAX_AT_ONCE = 500


def _teammates() -> list[tuple[str, str]]:
    return [(mate.username, mate.username) for mate in service.team()]


class AssignForm(forms.Form):
    """Whom the waiting conversations go to."""

    to = forms.ChoiceField(label="Teammate", choices=_teammates)
    note = forms.CharField(label="Note (only staff see it)", required=False, max_length=10_000)


class TagForm(forms.Form):
    """The tags to add, separated by commas."""

    tags = forms.CharField(
        label="Tags", help_text="Separated by commas: refund, vip", max_length=1000
    )

    def clean_tags(self) -> list[str]:
        try:
            names = tags.normalized(
                part for part in self.cleaned_data["tags"].split(",") if part.strip()
            )
        except PoppyError as exc:
            raise forms.ValidationError(exc.description or exc.code) from exc
        if not names:
            raise forms.ValidationError("Name at least one tag.")
        return names


class CloseForm(forms.Form):
    """Nothing to choose: the page asks before closing (a closed conversation stays closed)."""


@dataclass
class Outcome:
    """What a bulk action did: the conversations changed, and those refused with why."""

    done: list[str] = field(default_factory=list)
    refused: list[tuple[str, str]] = field(default_factory=list)


def each(conversation_ids: list[str], act: Callable[[str], object]) -> Outcome:
    """``act`` on each conversation in turn; a refusal stops only its own."""
    outcome = Outcome()
    for conversation_id in conversation_ids[:MAX_AT_ONCE]:
        try:
            act(conversation_id)
        except PoppyError as exc:
            outcome.refused.append((conversation_id, exc.description or exc.code))
        else:
            outcome.done.append(conversation_id)
    return outcome


def assign(conversation_ids: list[str], form: AssignForm, *, by: str) -> Outcome:
    to, note = form.cleaned_data["to"], form.cleaned_data["note"]
    return each(conversation_ids, lambda cid: service.assign(cid, to, by=by, note=note))


def tag(conversation_ids: list[str], form: TagForm, *, by: str) -> Outcome:
    names = form.cleaned_data["tags"]
    return each(conversation_ids, lambda cid: service.tag(cid, names, by=by))


def close(conversation_ids: list[str], form: CloseForm, *, by: str) -> Outcome:
    return each(conversation_ids, lambda cid: service.close(cid, by=by))
