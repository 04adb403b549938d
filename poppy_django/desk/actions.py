"""What staff do at the desk: each action a named function of one :class:`ActionCall`, each
one call of :mod:`poppy_django.service` as the signed-in staff member; the decisions on
actions awaiting approval; a staff member's own presence.

Every view is wrapped by the admin site (login, staff) and by :func:`desk_permission`, and
answers JSON (:mod:`.performing`: done once per request id).
"""

from __future__ import annotations

from collections.abc import Callable

from django.contrib.admin import AdminSite
from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_POST

from poppy_django import service
from poppy_django.desk import decisions, macros, parameters
from poppy_django.desk.performing import ActionCall, perform
from poppy_django.desk.permissions import desk_permission
from poppy_django.errors import PoppyError, error_response
from poppy_django.models import ActionRecord, ActionStatus

# -- the conversation's actions ----------------------------------------------------------------


def join(call: ActionCall) -> None:
    """Take the conversation: the Company Agent stays out until the person leaves."""
    service.human_joined(call.conversation_id, **call.as_staff)


def take_over(call: ActionCall) -> None:
    """Take the conversation from whoever has it (a teammate included)."""
    service.take_over(call.conversation_id, **call.as_staff)


def reply(call: ActionCall) -> None:
    """Write ``text`` to the User, over ``seen`` (the last event the page showed)."""
    service.post_message(call.conversation_id, call.text("text"), seen=call.seen(), **call.as_staff)


def leave(call: ActionCall) -> None:
    """Give the conversation back to the Company Agent."""
    service.human_left(call.conversation_id, **call.as_staff)


def unavailable(call: ActionCall) -> None:
    """No one can take the waiting handoff: say why (``reason``); the agent keeps it."""
    service.handoff_unavailable(call.conversation_id, call.text("reason"), **call.as_staff)


def request_user(call: ActionCall) -> None:
    """Ask the personal agent to bring the User, saying why (``reason``)."""
    service.request_user(call.conversation_id, call.text("reason"), **call.as_staff)


def close(call: ActionCall) -> None:
    """Close the conversation from the company side."""
    service.close(call.conversation_id, **call.as_staff)


def assign(call: ActionCall) -> None:
    """Give the waiting handoff to the teammate ``to``, with an optional ``note``."""
    to, note = call.text("to"), call.optional_text("note")
    service.assign(call.conversation_id, to, note=note, **call.as_staff)


def unassign(call: ActionCall) -> None:
    """The waiting handoff back to no one in particular."""
    service.unassign(call.conversation_id, **call.as_staff)


def transfer(call: ActionCall) -> None:
    """Give the conversation one holds to the teammate ``to``, with an optional ``note``."""
    to, note = call.text("to"), call.optional_text("note")
    service.transfer(call.conversation_id, to, note=note, **call.as_staff)


def to_team(call: ActionCall) -> None:
    """Give the conversation to the team ``team``, with an optional ``note``."""
    team, note = call.text("team"), call.optional_text("note")
    service.to_team(call.conversation_id, team, note=note, **call.as_staff)


def followed_up(call: ActionCall) -> None:
    """The missed customer was followed up elsewhere (``note``: how)."""
    service.followed_up(call.conversation_id, note=call.optional_text("note"), **call.as_staff)


def add_note(call: ActionCall) -> None:
    """A private note between staff (``text``): never on the wire."""
    service.add_note(call.conversation_id, call.text("text"), **call.as_staff)


def _tag_names(call: ActionCall) -> list[str]:
    """``tag``: one name, or several separated by commas."""
    return [name for name in call.text("tag").split(",") if name.strip()]


def tag(call: ActionCall) -> None:
    """Tag the conversation (``tag``: a name, or names separated by commas)."""
    service.tag(call.conversation_id, _tag_names(call), **call.as_staff)


def untag(call: ActionCall) -> None:
    """Take the tag ``tag`` (or several, separated by commas) off the conversation."""
    service.untag(call.conversation_id, _tag_names(call), **call.as_staff)


def macro(call: ActionCall) -> None:
    """Run the macro ``macro`` (its shortcut), over ``seen`` as a reply is."""
    macros.run(call.conversation_id, call.text("macro"), seen=call.seen(), **call.as_staff)


#: The actions by the name in their URL (``<conversation page>action/<name>/``).
ACTIONS: dict[str, Callable[[ActionCall], None]] = {
    "join": join,
    "take_over": take_over,
    "reply": reply,
    "leave": leave,
    "unavailable": unavailable,
    "request_user": request_user,
    "close": close,
    "assign": assign,
    "unassign": unassign,
    "transfer": transfer,
    "to_team": to_team,
    "followed_up": followed_up,
    "note": add_note,
    "tag": tag,
    "untag": untag,
    "macro": macro,
}


@require_POST
@desk_permission
def action(
    request: HttpRequest, conversation_id: str, name: str, admin_site: AdminSite
) -> JsonResponse:
    """Run the action ``name`` (one of :data:`ACTIONS`) on the conversation."""
    run = ACTIONS.get(name)
    if run is None:
        return error_response("not_found", f"No desk action {name!r}.")
    return perform(request, conversation_id, name, run)


# -- decisions on actions awaiting approval ----------------------------------------------------


@require_POST
@desk_permission
def approval(
    request: HttpRequest, conversation_id: str, record_id: int, decision: str, admin_site: AdminSite
) -> JsonResponse:
    """Approve (a worker runs it under the recorded roles) or reject an awaiting action.

    Approving answers once the decision is recorded (``"running": true``); the outcome
    message, carrying the request id, follows on the live stream when a worker has run it.
    """
    if decision not in ("approve", "reject"):
        return error_response("not_found", f"No decision {decision!r}.")
    record = ActionRecord.objects.filter(pk=record_id, conversation_id=conversation_id)
    if not record.exists():
        return error_response("not_found", "There is no such action in this conversation.")
    decide = decisions.approve if decision == "approve" else decisions.reject

    def run(call: ActionCall) -> None:
        decide(record_id, by=call.by, request_id=call.request_id)

    def decided_before(request_id: str) -> bool:
        return record.filter(request_id=request_id).exists()

    def running(request_id: str) -> bool:
        return record.filter(request_id=request_id, status=ActionStatus.APPROVED).exists()

    return perform(
        request, conversation_id, decision, run, done_before=decided_before, running=running
    )


# -- the staff member's own presence -----------------------------------------------------------


@require_POST
@desk_permission
def presence(request: HttpRequest, admin_site: AdminSite) -> JsonResponse:
    """Set oneself away (``{"away": true}``: no new handoffs) or available again."""
    try:
        away = parameters.body(request).get("away")
        if not isinstance(away, bool):
            raise PoppyError("invalid_request", "away must be true or false.")
        status = service.set_away(request.user.get_username(), away)
    except PoppyError as exc:
        return exc.response()
    return JsonResponse({"away": status.away, "available": status.available})
