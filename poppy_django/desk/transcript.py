"""Events as a person at the desk reads them: who wrote what, and what happened.

The desk renders each event from :func:`describe` (server-side, escaped by the template), in
the page and in the JSON the page re-fetches, so both show exactly the same thing. Staff-only
facts (the desk request id, the staff member) are shown here and never on the wire; so are
the desk's own events (:func:`describe_private`: private notes, take-overs, assignments),
which are not in the conversation's log at all.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from poppy_django.desk import wording
from poppy_django.models import DeskEvent, DeskEventKind, Event, EventType

_AUTHORIZATION = {
    "sign_in_required": "The customer must sign in",
    "insufficient_scope": "The customer's agent needs another permission",
}
#: Who wrote a message, in staff's words. The customer's side is a personal agent writing
#: for its User: what it relays is the customer's ("Customer"); a message with no text (data
#: or context only) is the agent acting by itself ("Customer's agent"); the User writing
#: themselves is "Customer (in person)".
CUSTOMER = "Customer"
CUSTOMERS_AGENT = "Customer's agent"
CUSTOMER_IN_PERSON = "Customer (in person)"
COMPANY_AGENT = "Company Agent"
#: Events per page of the transcript, in the page and in its JSON.
EVENTS_PAGE = 200
#: Longest JSON shown for a message's other data.
_DATA_PREVIEW = 500


@dataclass(frozen=True)
class Entry:
    """One transcript row."""

    seq: int
    event_id: str
    type: str
    #: user, company, human, state, system: the row's look.
    kind: str
    who: str
    text: str
    created_at: str
    details: list[str] = field(default_factory=list)
    #: A conversation this row points at (a Direct Conversation).
    link: str | None = None
    request_id: str | None = None
    by: str = ""
    #: A row of the conversation's log (what the personal agent reads too).
    private: bool = False


@dataclass(frozen=True)
class PrivateEntry:
    """A row only staff read: a private note, a take-over, an assignment or a transfer."""

    id: int
    kind: str
    after_seq: int
    who: str
    text: str
    created_at: str
    created_display: str
    request_id: str | None = None
    private: bool = True


def describe(event: Event) -> Entry:
    """The row a person reads for one event."""
    meta = event.meta or {}
    by = str(meta.get("by") or "")
    kind, who, text, details, link = _describe(event.type, event.payload, by)
    return Entry(
        seq=event.seq,
        event_id=event.public_id,
        type=event.type,
        kind=kind,
        who=who,
        text=text,
        created_at=event.created_at.isoformat(),
        details=details,
        link=link,
        request_id=meta.get("request_id"),
        by=by,
    )


def describe_private(event: DeskEvent) -> PrivateEntry:
    """The row staff read for one of the desk's own events (never on the wire)."""
    return PrivateEntry(
        id=event.pk,
        kind=event.kind,
        after_seq=event.after_seq,
        who=_private_words(event.kind, event.by, event.other),
        text=event.text,
        created_at=event.created_at.isoformat(),
        created_display=wording.when(event.created_at),
        request_id=event.request_id or None,
    )


def _private_words(kind: str, by: str, other: str) -> str:
    if kind == DeskEventKind.NOTE:
        return f"Private note by {by}"
    if kind == DeskEventKind.TOOK_OVER:
        return f"{by} took over from {other}"
    if kind == DeskEventKind.ASSIGNED:
        return f"{by} assigned it to {other}" if other != by else f"{by} took it"
    if kind == DeskEventKind.UNASSIGNED:
        return f"{by} gave it back to the queue" if other == by else f"{by} unassigned {other}"
    if kind == DeskEventKind.TRANSFERRED:
        return f"{by} transferred it to {other}"
    if kind == DeskEventKind.TAGGED:
        return f"{by} tagged it {other}"
    if kind == DeskEventKind.UNTAGGED:
        return f"{by} took the tag {other} off"
    if kind == DeskEventKind.MACRO:
        return f"{by} ran the macro {other}"
    if kind == DeskEventKind.REASSIGNED:  # by: whom it waited for (the text says why)
        return f"Reassigned from {by or 'the queue'} to {other or 'the queue'}"
    if kind == DeskEventKind.FOLLOWED_UP:
        return f"{by} followed up the customer outside the conversation"
    if kind == DeskEventKind.TO_TEAM:
        return f"{by} gave it to the team {other}"
    return f"{kind} by {by}"


def _describe(type: str, payload: Any, by: str) -> tuple[str, str, str, list[str], str | None]:
    if not isinstance(payload, dict):
        return "system", type, _json(payload), [], None
    if type == EventType.MESSAGE:
        return (*_message(payload.get("message") or {}, by), None)
    if type == EventType.STATE:
        status, responder = str(payload.get("status")), str(payload.get("responder"))
        # The queue's words (one vocabulary on every desk page and in the admin's list).
        words = wording.status_label(status, responder).capitalize()
        if by:
            words += f" (by {by})"
        return "state", "State", words, [f"{status} · {responder}"], None
    if type == EventType.AUTHORIZATION:
        error = str(payload.get("error"))
        words = _AUTHORIZATION.get(error, error)
        scope = payload.get("scope")
        details = [f"{error}" + (f", scope {scope}" if scope else "")]
        return "system", "Sign-in or permission asked", words, details, None
    if type == EventType.USER_REQUESTED:
        text = f"Asked for the customer in person: {payload.get('reason', '')}"
        return "system", by or "Support", text, [], None
    if type in (EventType.DIRECT_OPENED, EventType.DIRECT_CLOSED):
        opened = type == EventType.DIRECT_OPENED
        words = "The customer came in person" if opened else "The in-person conversation ended"
        target = payload.get("conversation_id")
        return "system", "In person", words, [], str(target) if target else None
    return "system", type, _json(payload), [], None


def _message(message: Any, by: str) -> tuple[str, str, str, list[str]]:
    # A stored message is what a personal agent sent: ``data`` and ``context`` may hold any
    # JSON (``components: "abc"``, ``actions: [1]``). Each row shows what it can read and
    # the rest as JSON, so one odd message never keeps staff from the conversation.
    message = message if isinstance(message, dict) else {"data": message}
    role, sender = message.get("role"), message.get("sender")
    if role == "company" and sender == "human":
        kind, who = "human", f"{by or 'Support'} (person)"
    elif role == "company":
        kind, who = "company", COMPANY_AGENT
    elif sender == "human":
        kind, who = "user", CUSTOMER_IN_PERSON
    else:
        kind, who = "user", CUSTOMER if _text(message.get("text")) else CUSTOMERS_AGENT
    details: list[str] = []
    raw_data = message.get("data")
    data = dict(raw_data) if isinstance(raw_data, dict) else {}
    if raw_data is not None and not isinstance(raw_data, dict):
        details.append("Data: " + _json(raw_data))
    components = data.pop("components", None)
    for component in _items(components, "components", details):
        details.append(
            f"Component {_text(component.get('name'))}: {_text(component.get('fallback_text', ''))}"
        )
    actions = data.pop("actions", None)
    for action in _items(actions, "actions", details):
        line = (
            f"Action {_text(action.get('tool'))}: {_text(action.get('status'))} — "
            f"{_text(action.get('summary'))}"
        )
        if action.get("error"):
            line += f" ({_text(action['error'])})"
        details.append(line)
    if data:
        details.append("Data: " + _json(data))
    context = message.get("context")
    if isinstance(context, dict) and context:
        details.append(
            "Context: " + ", ".join(f"{k}={_text(v)}" for k, v in sorted(context.items()))
        )
    elif context:
        details.append("Context: " + _json(context))
    text = _text(message.get("text"))
    if not text and not details:
        text = "(empty message)"
    elif not text and context and len(details) == 1:
        text = "(context only)"
    return kind, who, text, details


def _items(value: Any, name: str, details: list[str]) -> list[dict[str, Any]]:
    """The objects of a list the desk knows how to show; anything else is shown as JSON."""
    if value is None:
        return []
    if isinstance(value, list) and all(isinstance(item, dict) for item in value):
        return value
    details.append(f"Data ({name}): " + _json(value))
    return []


def _text(value: Any) -> str:
    """A field shown as words: strings as they are, anything else as its JSON."""
    if value is None:
        return ""
    return value if isinstance(value, str) else _json(value)


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)[:_DATA_PREVIEW]
