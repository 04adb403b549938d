"""DRF serializers for what personal agents send: a message, its context, a parent id.

They apply the wire's rules exactly (no coercion: ``5`` is not a string, ``"true"`` not a
boolean), ignore unknown fields, and keep a context's other fields as sent. Each error's
text is the wire's ``error_description`` and its code the wire's error code, so
:func:`wire_error` turns the first one into the JSON error the endpoint answers.

Beyond the wire's types, inbound JSON must also be storable and re-readable: no U+0000 or
lone surrogates (PostgreSQL and UTF-8 refuse them), no deeper nesting than
:data:`MAX_JSON_DEPTH`, and a message small enough, escaped as the wire writes it, to fit in
one JSON read.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from rest_framework import serializers
from rest_framework.exceptions import ErrorDetail, ValidationError

from poppy_django import ids
from poppy_django.errors import STATUS_OF, PoppyError
from poppy_django.models import Sender
from poppy_django.store import reading
from poppy_django.store.wire import InboundMessage

#: Deeper JSON than this is refused: far beyond any real use, and well inside the depth
#: that JSON encoders, the database and templates handle without recursing out.
MAX_JSON_DEPTH = 64
#: A message's wire form (ASCII-escaped, as reads write it) must fit one read with its
#: event's own fields (id, type, created_at, role).
MAX_MESSAGE_WIRE_BYTES = reading.MAX_RESPONSE_BYTES - reading.ENVELOPE_BYTES - 512

_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def _invalid(description: str, code: str = "invalid_request") -> ValidationError:
    return ValidationError(description, code=code)


def check_text(value: str, where: str) -> None:
    if _UNSTORABLE.search(value):
        raise _invalid(f"{where} contains U+0000 or an unpaired surrogate.")


def check_json(value: Any, where: str) -> None:
    """Every string (keys included) storable, and nesting within :data:`MAX_JSON_DEPTH`."""
    pending: list[tuple[Any, int]] = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, str):
            check_text(item, where)
        elif isinstance(item, dict | list):
            if depth > MAX_JSON_DEPTH:
                raise _invalid(f"{where} is nested deeper than {MAX_JSON_DEPTH} levels.")
            if isinstance(item, dict):
                for key in item:
                    check_text(key, where)
                pending.extend((child, depth + 1) for child in item.values())
            else:
                pending.extend((child, depth + 1) for child in item)


class WireString(serializers.Field):
    """A JSON string, taken as is (no trimming, no coercion of numbers)."""

    def __init__(self, *, where: str, **kwargs: Any) -> None:
        self.where = where
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            raise _invalid(f"{self.where} must be a string.")
        check_text(data, self.where)
        return data

    def to_representation(self, value: str) -> str:
        return value


class WireBoolean(serializers.Field):
    """A JSON ``true`` or ``false``, nothing that merely looks like one."""

    def __init__(self, *, where: str, **kwargs: Any) -> None:
        self.where = where
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> bool:
        if not isinstance(data, bool):
            raise _invalid(f"{self.where} must be a boolean.")
        return data

    def to_representation(self, value: bool) -> bool:
        return value


class WireObject(serializers.Field):
    """A JSON object, kept as sent (``message.data``)."""

    def __init__(self, *, where: str, **kwargs: Any) -> None:
        self.where = where
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        if not isinstance(data, dict):
            raise _invalid(f"{self.where} must be an object.")
        check_json(data, self.where)
        return data

    def to_representation(self, value: dict[str, Any]) -> dict[str, Any]:
        return value


class WireId(serializers.Field):
    """An id of the wire's alphabet: 1-256 of ``[A-Za-z0-9_-]``."""

    def __init__(self, *, where: str, **kwargs: Any) -> None:
        self.where = where
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> str:
        if not ids.is_valid_id(data):
            raise _invalid(f"{self.where} must be 1-256 of [A-Za-z0-9_-].")
        return str(data)

    def to_representation(self, value: str) -> str:
        return value


def _object_errors(description: str) -> dict[str, Any]:
    return {"required": description, "null": description, "invalid": description}


class ContextSerializer(serializers.Serializer):
    """``message.context``: three typed fields; every other field is kept as sent."""

    locale = WireString(where="message.context.locale", required=False)
    time_zone = WireString(where="message.context.time_zone", required=False)
    user_available = WireBoolean(where="message.context.user_available", required=False)

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        super().to_internal_value(data)  # the typed fields; raises the first error
        check_json(data, "message.context")
        return dict(data)


class MessageSerializer(serializers.Serializer):
    """An inbound message: ``{id, sender, text?, data?, context?}``, at least one of the three."""

    id = WireId(where="message.id")
    sender = serializers.ChoiceField(
        choices=Sender.values,
        error_messages=_object_errors('message.sender must be "agent" or "human".')
        | {"invalid_choice": 'message.sender must be "agent" or "human".'},
    )
    text = WireString(where="message.text", required=False, allow_null=True)
    data = WireObject(where="message.data", required=False, allow_null=True)  # type: ignore[assignment]
    context = ContextSerializer(  # type: ignore[assignment]
        required=False,
        allow_null=True,
        error_messages=_object_errors("message.context must be an object."),
    )

    def validate(self, attrs: dict[str, Any]) -> InboundMessage:
        text, data, context = attrs.get("text"), attrs.get("data"), attrs.get("context")
        if text is None and data is None and context is None:
            raise _invalid("A message needs text, data or context.")
        message = InboundMessage(
            id=attrs["id"], sender=attrs["sender"], text=text, data=data, context=context
        )
        wire_form = {"id": message.id, "sender": message.sender, "text": text, "data": data}
        if len(json.dumps({**wire_form, "context": context})) > MAX_MESSAGE_WIRE_BYTES:
            raise _invalid(
                f"Escaped as the wire writes it, this message exceeds "
                f"{MAX_MESSAGE_WIRE_BYTES} bytes.",
                code="request_too_large",
            )
        return message


class ParentField(serializers.Field):
    """``parent_conversation_id``: a string; one that cannot be an id is no one's conversation."""

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            raise _invalid("parent_conversation_id must be a string.")
        if not ids.is_valid_id(data):
            raise _invalid("No such conversation.", code="conversation_not_found")
        return data

    def to_representation(self, value: str) -> str:
        return value


_MESSAGE_REQUIRED = _object_errors("The body needs a message object.")


class WireBodySerializer(serializers.Serializer):
    """A request body: a JSON object (``is_valid(raise_exception=True)``; the endpoint answers
    the ``ValidationError`` with :func:`wire_error`)."""

    default_error_messages = {"invalid": "The body must be a JSON object."}


class MessageBodySerializer(WireBodySerializer):
    """``POST {endpoint}/{id}/messages``: ``{"message": {...}}``."""

    message = MessageSerializer(error_messages=_MESSAGE_REQUIRED)


class StartBodySerializer(WireBodySerializer):
    """``POST {endpoint}``: a message, optionally with ``parent_conversation_id``."""

    parent_conversation_id = ParentField(required=False, allow_null=True)
    message = MessageSerializer(error_messages=_MESSAGE_REQUIRED)


def _first_error(errors: Any) -> ErrorDetail | None:
    """The first error in field order (the order the wire's checks run in)."""
    if isinstance(errors, ErrorDetail):
        return errors
    if isinstance(errors, str):
        return ErrorDetail(errors, code="invalid_request")
    items = errors.values() if isinstance(errors, Mapping) else errors
    for item in items:
        found = _first_error(item)
        if found is not None:
            return found
    return None


def wire_error(errors: Any) -> PoppyError:
    """The JSON error for a serializer's errors: its first error's code and text."""
    first = _first_error(errors)
    if first is None:
        return PoppyError("invalid_request", "The body is not a valid request.")
    code = first.code if first.code in STATUS_OF else "invalid_request"
    if code == "conversation_not_found":
        return PoppyError(code)
    return PoppyError(code, str(first))
