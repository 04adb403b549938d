"""Macros: several desk steps as one decision (a reply, tags, a teammate, then keep, give
back or close), each step a call of :mod:`poppy_django.service`, so every rule of one owner
and every live event holds as if a person had pressed each button.

All its steps happen, or none: a refused step (a teammate holds it, the customer wrote since
``seen``, it is closed) rolls back the steps before it, and the refusal is the macro's.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction

from poppy_django import service
from poppy_django.errors import PoppyError
from poppy_django.models import DeskEventKind, Macro, MacroThen, Status
from poppy_django.staff import canned
from poppy_django.store import event_log


@dataclass(frozen=True)
class MacroView:
    """A macro as the desk lists it: what it will do, in words."""

    shortcut: str
    title: str
    steps: str


def steps_of(macro: Macro) -> str:
    """What the macro does, in the desk's words ("Reply, tag refund, close")."""
    steps = ["reply"] if macro.reply.strip() else []
    names = [tag.name for tag in macro.tags.all()]
    if names:
        steps.append("tag " + ", ".join(names))
    if macro.give_to:
        steps.append(f"give to {macro.give_to}")
    if macro.then == MacroThen.LEAVE:
        steps.append("give back to the Company Agent")
    elif macro.then == MacroThen.CLOSE:
        steps.append("close")
    return (", ".join(steps) or "nothing").capitalize()


def listed() -> list[MacroView]:
    """Every macro, by shortcut, with its steps."""
    return [
        MacroView(macro.shortcut, macro.title, steps_of(macro))
        for macro in Macro.objects.prefetch_related("tags")
    ]


@transaction.atomic
def run(
    conversation_id: str, shortcut: str, *, by: str, seen: str, request_id: str | None = None
) -> Macro:
    """Run the macro ``shortcut`` on the conversation as ``by``, who read it up to ``seen``
    (the reply's compare-and-set). ``not_found`` for no such macro; any step's refusal is
    the macro's, with nothing written."""
    macro = Macro.objects.prefetch_related("tags").filter(shortcut=shortcut).first()
    if macro is None:
        raise PoppyError("not_found", f"No macro {shortcut!r}.")
    conversation = event_log.lock(conversation_id)
    if macro.reply.strip():
        text = canned.filled(conversation, macro.reply)
        service.post_message(conversation_id, text, by=by, seen=seen, request_id=request_id)
    names = [tag.name for tag in macro.tags.all()]
    if names:
        service.tag(conversation_id, names, by=by, request_id=request_id)
    if macro.give_to:
        if service.get(conversation_id).status == Status.QUEUED:
            service.assign(conversation_id, macro.give_to, by=by, request_id=request_id)
        else:
            service.transfer(conversation_id, macro.give_to, by=by, request_id=request_id)
    if macro.then == MacroThen.LEAVE:
        service.human_left(conversation_id, by=by, request_id=request_id)
    elif macro.then == MacroThen.CLOSE:
        service.close(conversation_id, by=by, request_id=request_id)
    service.log_event(
        conversation_id,
        DeskEventKind.MACRO,
        by=by,
        other=macro.shortcut,
        text=macro.title,
        request_id=request_id,
    )
    return macro
