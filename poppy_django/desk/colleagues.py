"""Who else is on a conversation's page, and who is typing a reply: told between staff.

Each open conversation page says what its staff member is doing there (``viewing`` as it
opens and again every so often, ``typing`` while they write a reply, ``idle`` when they
stop, ``gone`` as the page closes) and the server passes it on to the other pages of that
conversation over the desk's live channel (the conversation's channel, read by staff
only: :mod:`.channels`). Nothing is stored: a page forgets a colleague it has not heard from
in a while, and a page that opens says ``hello`` so the others say again that they are
there. It is a courtesy, not a lock: one owner is the service's rule, whatever this says.
"""

from __future__ import annotations

from django.contrib.admin import AdminSite
from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_POST

from poppy_django.desk import parameters
from poppy_django.desk.permissions import desk_permission
from poppy_django.desk.state import conversation_or_404
from poppy_django.errors import PoppyError
from poppy_django.fanout import tell_conversations_desk

#: The event type the pages listen for.
ACTIVITY = "poppy.activity"
#: What a staff member may be doing on a conversation's page.
DOINGS = ("viewing", "typing", "idle", "gone")


def tell(conversation_id: str, by: str, doing: str, *, hello: bool = False) -> None:
    """Tell the conversation's other pages that ``by`` is ``doing`` (see :data:`DOINGS`)."""
    tell_conversations_desk(conversation_id, ACTIVITY, {"by": by, "doing": doing, "hello": hello})


@require_POST
@desk_permission
def activity(request: HttpRequest, conversation_id: str, admin_site: AdminSite) -> JsonResponse:
    """``{"doing": "viewing"|"typing"|"idle"|"gone", "hello": bool}`` from a staff member's
    page, passed on in their name (the signed-in user, never one the page names)."""
    conversation = conversation_or_404(conversation_id)
    try:
        found = parameters.body(request)
        doing, hello = found.get("doing"), found.get("hello", False)
        if doing not in DOINGS:
            raise PoppyError("invalid_request", f"doing: one of {', '.join(DOINGS)}.")
        if not isinstance(hello, bool):
            raise PoppyError("invalid_request", "hello must be true or false.")
    except PoppyError as exc:
        return exc.response()
    # A courtesy between staff: the live channel away loses this hint only (logged).
    tell(conversation.id, request.user.get_username(), doing, hello=hello)
    return JsonResponse({"doing": doing})
