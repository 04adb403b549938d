"""Running a desk action once per request id, and answering what it caused.

The browser sends a ``request_id`` it made; the service echoes it in ``Event.meta``, on the
desk's own events and on the desk's live channel, and the page settles its pending row by
it. A request sent twice (a double click, a retry) is done once: the repeat is answered
with the first one's effect.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypedDict

from django.db import transaction
from django.http import HttpRequest, JsonResponse

from poppy_django.desk import parameters
from poppy_django.desk.state import conversation_state
from poppy_django.errors import PoppyError, error_response
from poppy_django.models import Conversation, DeskEvent, Event
from poppy_django.store import event_log


class AsStaff(TypedDict):
    """Who asks the service, and the request id it echoes on what it causes."""

    by: str
    request_id: str


@dataclass(frozen=True)
class ActionCall:
    """One desk action as a staff member asked for it; the action reads its own parameters
    from the body through the methods here (:mod:`.parameters`)."""

    conversation_id: str
    #: The request's JSON object.
    body: dict[str, Any]
    #: The staff member (username).
    by: str
    request_id: str

    @property
    def as_staff(self) -> AsStaff:
        return {"by": self.by, "request_id": self.request_id}

    def text(self, name: str) -> str:
        return parameters.text(self.body, name)

    def optional_text(self, name: str) -> str:
        return parameters.optional_text(self.body, name)

    def seen(self) -> str:
        return parameters.seen(self.conversation_id, self.body)


def never(request_id: str) -> bool:
    return False


def perform(
    request: HttpRequest,
    conversation_id: str,
    name: str,
    run: Callable[[ActionCall], object],
    *,
    done_before: Callable[[str], bool] = never,
    running: Callable[[str], bool] = never,
) -> JsonResponse:
    """Run one desk action once per request id; answer what it caused.

    The body is parsed once, here. Checking for a repeat and acting happen under the
    conversation's row lock, so a request sent twice at once (a double click, a retry)
    is done once: the second waits for the first, then finds its effect and answers it.
    ``done_before`` recognises a retried request whose effect is not an event yet, and
    ``running`` says the effect is still being made by a worker (``"running": true``: the
    events carrying the request id follow on the live stream).
    """
    try:
        body = parameters.body(request)
        request_id = parameters.request_id(body)
        with transaction.atomic():
            event_log.lock(conversation_id)
            replayed = (
                bool(caused(conversation_id, request_id))
                or bool(caused_privately(conversation_id, request_id))
                or done_before(request_id)
            )
            if not replayed:
                by = request.user.get_username()
                run(ActionCall(conversation_id, body, by, request_id))
        conversation = Conversation.objects.get(pk=conversation_id)
    except PoppyError as exc:
        return _refusal(exc, conversation_id)
    except Conversation.DoesNotExist:
        return error_response("conversation_not_found")
    return JsonResponse(
        {
            "ok": True,
            "action": name,
            "request_id": request_id,
            "events": caused(conversation_id, request_id),
            "desk_events": caused_privately(conversation_id, request_id),
            "replayed": replayed,
            "running": running(request_id),
            "conversation": conversation_state(conversation),
        }
    )


def caused(conversation_id: str, request_id: str) -> list[int]:
    """The events a request id is echoed on (the correlation contract)."""
    return list(
        Event.objects.filter(conversation_id=conversation_id, meta__request_id=request_id)
        .order_by("seq")
        .values_list("seq", flat=True)
    )


def caused_privately(conversation_id: str, request_id: str) -> list[int]:
    """The desk's own events a request id wrote (notes, assignments, take-overs)."""
    return list(
        DeskEvent.objects.filter(conversation_id=conversation_id, request_id=request_id)
        .order_by("pk")
        .values_list("pk", flat=True)
    )


def _refusal(error: PoppyError, conversation_id: str) -> JsonResponse:
    """A refused action, with the conversation as it is now: the page shows why (who has
    it, what arrived) and what it can do next from the server's state, not its own."""
    conversation = Conversation.objects.filter(pk=conversation_id).first()
    if conversation is None:
        return error.response()
    return error_response(
        error.code,
        error.description,
        status=error.status,
        extra={**error.extra, "conversation": conversation_state(conversation)},
        headers=error.headers,
    )
