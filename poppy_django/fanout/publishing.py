"""Publishing wake-ups and text deltas: to waiting readers on the bus, to the desk's browsers.

What is published is a nudge ("conversation X has new events", sent once the write
commits) or a piece of a reply being written. A waiting reader woken by a nudge re-reads the
database, so a lost nudge loses nothing (the watchdog catches it). A nudge also carries what
the write committed, for the processes' tails of recent events (``poppy_django.store.tail``):
its events (when they are small), the conversation's state, and its version, set with the
publish, by which a tail tells that it holds all there is (when that publish fails,
:mod:`.versions` keeps the previous version from being trusted: in this process at once, in
the others once Redis answers its retry). The support desk's browser streams are
django-eventstream's views, so what they show is sent with its ``send_event``: every
conversation's nudges on the desk channel, reply pieces on the conversation's channel.

django-eventstream publishes every deployment's events on one server-wide Redis channel
(``events_channel``, its own) and hands each to the listeners of the event's channel name,
so the names carry this deployment's namespace (``poppy-desk@poppy:6``): a desk never
streams another deployment's conversations.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from typing import Any

from django.db import transaction
from django_eventstream import send_event

from poppy_django.fanout import bus, versions
from poppy_django.fanout.redis_clients import namespace
from poppy_django.fanout.retrying import Failures

logger = logging.getLogger("poppy_django.fanout")

#: The type of a nudge and of a text delta.
NUDGE = "poppy.nudge"
DELTA = "poppy.delta"
#: The type of a change only staff see (a private note, a take-over, an assignment).
DESK_NEWS = "poppy.desk"
#: A nudge carries its write's events while their JSON stays within this many bytes (a
#: bigger write's readers read it from the database).
NUDGE_EVENTS_BYTES = 64 * 1024


#: Told of each publish's outcome (:func:`report_failures_to`, from the app's ``ready()``:
#: the fan-out sits below ``poppy_django.observe``, which logs streaks).
_failures: Failures | None = None
#: Said with the first failure of a streak: why losing the nudges meanwhile is no loss.
LOSS_HINT = "readers and the desk re-read the database; nothing is lost"


def report_failures_to(failures: Failures | None) -> None:
    """Publishing's failures go to ``failures`` from now on (None: a warning for each)."""
    global _failures
    _failures = failures


def _failed(exc: Exception, what: str) -> None:
    if _failures is None:
        logger.warning("poppy: could not publish %s", what, exc_info=exc)
    else:
        _failures.failed(exc, LOSS_HINT)


def _published() -> None:
    if _failures is not None:
        _failures.succeeded()


def desk_channel() -> str:
    """The desk's channel: every conversation's changes, for staff browsers."""
    return f"poppy-desk@{namespace()}"


def conversation_channel(conversation_id: str) -> str:
    """A conversation's channel: its key on the bus, its desk stream's channel name."""
    return f"poppy-{conversation_id}@{namespace()}"


def _send(
    publish: Callable[[str, str, dict[str, Any]], Any],
    channel: str,
    event_type: str,
    data: dict[str, Any],
) -> None:
    """``publish`` (the bus for readers, ``send_event`` for browsers), never failing a write.
    Only the bus's calls end a streak of failures: it reaches the Redis of the setting as
    it is now, while django-eventstream's client may publish in-process (its setting read
    once, at its import)."""
    try:
        publish(channel, event_type, data)
    except Exception as exc:
        # A lost nudge is recovered by the readers' watchdog; never fail a write.
        _failed(exc, f"{event_type} on {channel}")
    else:
        if publish is not send_event:
            _published()


def nudge_on_commit(
    conversation_id: str,
    last_seq: int,
    summary: dict[str, Any],
    *,
    version: str,
    state: dict[str, Any],
    events: Callable[[], list[dict[str, Any]]],
) -> None:
    """After the surrounding transaction commits, wake the conversation's readers and the
    desk, and tell every process's tail the write: ``version`` (the conversation's newest),
    its ``state`` (status and responder) and its ``events`` (their wire forms, asked for at
    the commit; left out past :data:`NUDGE_EVENTS_BYTES`)."""

    def publish() -> None:
        written: list[dict[str, Any]] | None = events()
        if len(json.dumps(written)) > NUDGE_EVENTS_BYTES:
            written = None
        nudge = {"seq": last_seq, "version": version, **state, "events": written}

        def publish_versioned(channel: str, event_type: str, data: dict[str, Any]) -> None:
            bus.publish(channel, event_type, data, version=version)

        _send(publish_versioned, conversation_channel(conversation_id), NUDGE, nudge)
        desk_nudge = {"conversation_id": conversation_id, "seq": last_seq, **summary}
        _send(send_event, desk_channel(), NUDGE, desk_nudge)

    transaction.on_commit(publish)


def forget_version_on_commit(conversation_id: str) -> None:
    """After the surrounding transaction commits, every process's tail of the conversation
    is out of date (pruned, deleted or bound to an account): its readers ask the database
    until its next write (when marking it fails, :mod:`.versions` keeps the previous version
    from being trusted: in this process at once, in the others once Redis answers its
    retry)."""

    def forget() -> None:
        _send(
            lambda channel, _type, _data: versions.forget_version(channel),
            conversation_channel(conversation_id),
            "version",
            {},
        )

    transaction.on_commit(forget)


def desk_news_on_commit(conversation_id: str, news: dict[str, Any]) -> None:
    """After the surrounding transaction commits, tell the desk's browsers of a change only
    staff see: on the desk channel alone, never on the bus that personal agents' reads and
    streams listen to."""

    def publish() -> None:
        _send(send_event, desk_channel(), DESK_NEWS, {"conversation_id": conversation_id, **news})

    transaction.on_commit(publish)


def tell_conversations_desk(conversation_id: str, event_type: str, data: dict[str, Any]) -> None:
    """Tell the desk's pages of one conversation something at once, outside any write (a
    hint between staff: who is typing there): on its desk channel alone, never on the bus
    that personal agents' reads and streams listen to."""
    _send(send_event, conversation_channel(conversation_id), event_type, data)


def publish_delta(conversation_id: str, message_id: str, text: str) -> None:
    """Relay a piece of a reply being written; it is never stored."""
    publish_deltas([(conversation_id, message_id, text)])


def publish_deltas(deltas: Sequence[tuple[str, str, str]]) -> None:
    """Relay pieces of replies being written, ``(conversation id, message id, text)`` each,
    in order, to readers (:func:`publish_deltas_to_readers`) and the desk."""
    publish_deltas_to_readers(deltas)
    publish_deltas_to_desk(deltas)


def publish_deltas_to_readers(deltas: Sequence[tuple[str, str, str]]) -> None:
    """The pieces to the conversations' waiting readers: one bus message for them all (one
    Redis ``PUBLISH``, whichever conversations they belong to)."""
    items = [
        (conversation_channel(conversation_id), DELTA, {"message_id": message_id, "text": text})
        for conversation_id, message_id, text in deltas
    ]
    if not items:
        return
    try:
        bus.publish_many(items)
    except Exception as exc:
        _failed(exc, f"{len(items)} text deltas")
    else:
        _published()


def publish_deltas_to_desk(deltas: Sequence[tuple[str, str, str]]) -> None:
    """The pieces to each conversation's desk stream (django-eventstream, one event each)."""
    for conversation_id, message_id, text in deltas:
        delta = {"message_id": message_id, "text": text}
        _send(send_event, conversation_channel(conversation_id), DELTA, delta)
