"""Each process's tail of the recent events of the conversations read there.

A JSON read answered from the database leaves here what it read when that reaches the
conversation's newest event: the conversation's owner and state and those events. Every
nudge this process hears for the conversation afterwards (the fan-out's :func:`bus.watch
<poppy_django.fanout.bus.watch>`: a write's events, state and version, on the subscription
the process's waiting readers already hold) extends it. A later read whose cursor falls
inside it can then be answered from memory, on the event loop, with no thread and no query
(:mod:`poppy_django.api.tail_reads`) — but only when the entry is current: its version
(``event_log.version_of``) must be the one the conversation's last write set
(:func:`versions.current_version <poppy_django.fanout.versions.current_version>`). A write sets it
before its answer is sent, so a read never misses a write its client was told of (an older
write's version landing later never replaces it; when setting it fails, the writing
process trusts no version of the conversation until the key is marked out of date on
Redis, which its retries do within seconds of Redis answering, or the old version has
expired: a read there asks the database meanwhile); a nudge still on its way, lost, or too
big to carry its events, a pruning, a deletion and an account's binding (which mark it out
of date; a mark that fails is handled as a failed version is) all send the read to the
database, which answers it and leaves a fresh entry (and offers its version, for a
conversation whose last write is too old to have one set).

The tail is bounded: at most ``PAGE_SIZE`` events an entry, and ``POPPY["TAIL_MAX_BYTES"]``
of event JSON in all (the least recently read entries go first; 0 turns it off).
"""

from __future__ import annotations

import copy
import logging
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.core.signals import setting_changed
from django.db import router, transaction
from django.dispatch import receiver

from poppy_django import fanout, ids
from poppy_django.conf import poppy_settings
from poppy_django.fanout import bus, versions
from poppy_django.models import Conversation
from poppy_django.store import event_log, reading

logger = logging.getLogger("poppy_django.fanout")

#: What an entry costs beside its events' JSON (its objects, its key), counted in its bytes.
ENTRY_OVERHEAD_BYTES = 1024


@dataclass(frozen=True)
class Entry:
    """One conversation as this process last heard it: its read fields and its newest
    events, ``first_seq`` to ``state.last_seq`` with none missing (none when it is past
    ``last_seq``), and each event's bytes in a page."""

    key: str
    state: Conversation
    first_seq: int
    events: tuple[dict[str, Any], ...]
    sizes: tuple[int, ...]

    @property
    def version(self) -> str:
        """What the fan-out's version of the conversation is while this entry is current."""
        return event_log.version_of(self.state)

    @property
    def nbytes(self) -> int:
        return sum(self.sizes) + ENTRY_OVERHEAD_BYTES

    def after(self, cursor: str | None) -> int | None:
        """The sequence number a read from ``cursor`` starts after, when this entry holds
        every event after it and the database would accept the cursor; None: ask it (which
        also answers the cursors it refuses)."""
        state = self.state
        if cursor is None:
            return 0 if self.first_seq == 1 and state.pruned_before_seq < 2 else None
        seq = ids.parse_cursor(state.pk, cursor)
        if seq is None or seq > state.last_seq or seq < state.pruned_before_seq - 1:
            return None
        return seq if seq >= self.first_seq - 1 else None

    def page(self, after: int, cursor: str | None) -> reading.Page:
        """What a read from ``cursor`` (after ``after``, which :meth:`after` gave) answers."""
        start = after - (self.first_seq - 1)
        end = start + poppy_settings.PAGE_SIZE + 1
        return reading.paged(self.state, self.events[start:end], self.sizes[start:end], cursor)


class Tail:
    """The process's entries, least recently read first, within their byte bound."""

    def __init__(self) -> None:
        self._entries: OrderedDict[str, Entry] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def entry(self, conversation_id: str) -> Entry | None:
        """The conversation's entry, if this process holds one (it may not be current)."""
        with self._lock:
            found = self._entries.get(conversation_id)
            if found is not None:
                self._entries.move_to_end(conversation_id)
            return found

    def remember(self, conversation: Conversation, page: reading.Page) -> None:
        """Keep what a read from the database answered, when it reached the conversation's
        newest event: ``conversation`` holds :data:`reading.READ_FIELDS` as that read's one
        snapshot read them, ``page`` is its answer."""
        if page.has_more or _limit() <= 0:
            return
        events = page.events
        if events:
            first = ids.parse_cursor(conversation.pk, events[0]["id"])
            if first is None or first + len(events) - 1 != conversation.last_seq:
                return
        else:
            first = conversation.last_seq + 1
        entry = Entry(
            key=fanout.conversation_channel(conversation.pk),
            state=_snapshot(conversation),
            first_seq=first,
            events=tuple(events),
            sizes=tuple(reading.wire_size(event) for event in events),
        )
        with self._lock:
            held = self._entries.get(conversation.pk)
            if held is not None and held.state.last_seq > conversation.last_seq:
                return  # a nudge heard meanwhile took it further
            self._put(conversation.pk, entry)
        if transaction.get_connection(router.db_for_read(Conversation)).in_atomic_block:
            return  # what it read may never commit (a test's transaction): no version
        try:  # a conversation not written lately has no version yet: this read's, then
            versions.offer_version(entry.key, entry.version)
        except Exception:  # Redis away: later reads ask the database meanwhile
            logger.debug("poppy: could not offer a tail's version", exc_info=True)

    def heard(self, key: str, item: bus.Item) -> None:
        """A message of the fan-out (:func:`bus.watch`): a nudge extends its conversation's
        entry with the write it tells of, or drops the entry when it cannot."""
        if item.type != fanout.NUDGE:
            return
        conversation_id = _conversation_of(key)
        if conversation_id is None:
            return
        with self._lock:
            held = self._entries.get(conversation_id)
            if held is None:
                return
            seq = item.data.get("seq")
            if not isinstance(seq, int) or seq <= held.state.last_seq:
                return  # one already heard, or older than what a read left
            extended = _extended(held, item.data, seq)
            if extended is None:
                self._drop(conversation_id)
            else:
                self._put(conversation_id, extended)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._bytes = 0

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def nbytes(self) -> int:
        """The bytes counted against ``TAIL_MAX_BYTES``."""
        return self._bytes

    def _put(self, conversation_id: str, entry: Entry) -> None:
        self._drop(conversation_id)
        self._entries[conversation_id] = entry
        self._bytes += entry.nbytes
        limit = _limit()
        while self._bytes > limit and self._entries:
            _, oldest = self._entries.popitem(last=False)
            self._bytes -= oldest.nbytes

    def _drop(self, conversation_id: str) -> None:
        gone = self._entries.pop(conversation_id, None)
        if gone is not None:
            self._bytes -= gone.nbytes


def _limit() -> int:
    return int(poppy_settings.TAIL_MAX_BYTES)


def _snapshot(conversation: Conversation) -> Conversation:
    """A copy of the read fields (an entry's state is never changed: a nudge's update makes
    another), never saved."""
    return copy.copy(conversation)


def _conversation_of(key: str) -> str | None:
    """The conversation a bus key names (``poppy-<id>@<namespace>``)."""
    prefix, _, rest = key.partition("-")
    conversation_id = rest.rpartition("@")[0]
    return conversation_id if prefix == "poppy" and ids.is_valid_id(conversation_id) else None


def _extended(held: Entry, nudge: dict[str, Any], seq: int) -> Entry | None:
    """``held`` with the write a nudge tells of (up to ``seq``), or None when the nudge
    cannot extend it: no events carried, its state missing, or a write missed."""
    events, version = nudge.get("events"), nudge.get("version")
    status, responder = nudge.get("status"), nudge.get("responder")
    pruned, account_id = nudge.get("pruned_before_seq"), nudge.get("account_id", "")
    if not isinstance(events, list) or not events or not isinstance(version, str):
        return None
    if not (isinstance(status, str) and isinstance(responder, str) and isinstance(pruned, int)):
        return None
    if account_id == "" or not (account_id is None or isinstance(account_id, str)):
        return None  # whose the conversation is now is not said
    state = held.state
    first_written = seq - len(events) + 1
    if [_seq_of(state.pk, event) for event in events] != list(range(first_written, seq + 1)):
        return None
    if first_written == state.last_seq + 1:
        kept: Sequence[dict[str, Any]] = held.events + tuple(events)
        sizes: Sequence[int] = held.sizes + tuple(reading.wire_size(e) for e in events)
        first = held.first_seq
    else:  # writes were missed: the entry starts again from this one's events
        kept, sizes, first = events, [reading.wire_size(e) for e in events], first_written
    # No more than a page of events; none a pruning has expired.
    keep_from = max(first, pruned, seq - poppy_settings.PAGE_SIZE + 1)
    drop = keep_from - first
    updated = Conversation(
        id=state.pk,
        client_id=state.client_id,
        user_id=state.user_id,
        account_id=account_id,
        status=status,
        responder=responder,
        last_seq=seq,
        pruned_before_seq=pruned,
    )
    extended = Entry(held.key, updated, keep_from, tuple(kept[drop:]), tuple(sizes[drop:]))
    return extended if extended.version == version else None


def _seq_of(conversation_id: str, event: Any) -> int | None:
    if not isinstance(event, dict) or not isinstance(event.get("id"), str):
        return None
    return ids.parse_cursor(conversation_id, event["id"])


#: The process's tail.
tail = Tail()
bus.watch(tail.heard)


@receiver(setting_changed)
def _clear_on_change(*, setting: str, **kwargs: Any) -> None:
    if setting in ("POPPY", "EVENTSTREAM_REDIS"):  # another deployment, bound or page size
        tail.clear()
