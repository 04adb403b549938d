"""Maintenance shared by management commands and Celery beat tasks: prune and reap.

Both are idempotent and safe to run anywhere at any time, next to live traffic: pruning
deletes in small batches of primary keys (short transactions, no long locks) and never
touches what a conversation still needs (user messages not answered yet); reaping only
re-dispatches, and the lease decides who runs. Neither is needed for correctness: workers
recover orphaned turns themselves (:mod:`poppy_django.engine.recovery`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from django.db import transaction
from django.db.models import Max, Min
from django.utils import timezone

from poppy_django.conf import poppy_settings
from poppy_django.models import Conversation, Event
from poppy_django.registries import Registry
from poppy_django.store import event_log, lifecycle

_DURATION = re.compile(r"(\d+)([smhdw])")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_duration(text: str) -> timedelta:
    """``30d``, ``2h``, ``15m``, ``0s``, or combinations like ``1d12h``."""
    cleaned = text.strip().lower()
    if not cleaned or _DURATION.sub("", cleaned):
        raise ValueError(f"{text!r} is not a duration like 30d, 2h, 15m or 0s.")
    seconds = sum(int(n) * _UNIT_SECONDS[unit] for n, unit in _DURATION.findall(cleaned))
    return timedelta(seconds=seconds)


@dataclass
class PruneReport:
    conversations: int = 0
    events: int = 0


def prune_events(
    older_than: timedelta,
    *,
    batch_size: int = 1000,
    dry_run: bool = False,
    progress: Callable[[PruneReport], None] | None = None,
) -> PruneReport:
    """Delete events older than ``older_than``; cursors into them then answer 410."""
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1.")
    cutoff = timezone.now() - older_than
    report = PruneReport()
    candidates = (
        Event.objects.filter(created_at__lt=cutoff)
        .order_by()  # the model's ordering would make DISTINCT per event
        .values_list("conversation_id", flat=True)
        .distinct()
        .iterator()
    )
    for conversation_id in candidates:
        bound = _prunable_up_to(conversation_id, cutoff)
        if bound is None:
            continue
        report.conversations += 1
        if dry_run:
            report.events += Event.objects.filter(
                conversation_id=conversation_id, seq__lte=bound
            ).count()
        else:
            report.events += _delete_up_to(conversation_id, bound, batch_size)
        if progress is not None:
            progress(report)
    return report


def _prunable_up_to(conversation_id: str, cutoff: object) -> int | None:
    """The highest seq that may go: old, and before the first unanswered user message."""
    newest_old = Event.objects.filter(
        conversation_id=conversation_id, created_at__lt=cutoff
    ).aggregate(seq=Max("seq"))["seq"]
    if newest_old is None:
        return None
    answered = Conversation.objects.values_list("answered_seq", flat=True).get(pk=conversation_id)
    first_unanswered = Event.objects.filter(
        conversation_id=conversation_id, role="user", seq__gt=answered
    ).aggregate(seq=Min("seq"))["seq"]
    if first_unanswered is not None:
        newest_old = min(newest_old, first_unanswered - 1)
    return newest_old if newest_old > 0 else None


def _delete_up_to(conversation_id: str, bound: int, batch_size: int) -> int:
    deleted = 0
    while True:
        with transaction.atomic():
            batch = list(
                Event.objects.filter(conversation_id=conversation_id, seq__lte=bound)
                .order_by("seq")
                .values_list("pk", "seq")[:batch_size]
            )
            if not batch:
                return deleted
            # Mark first: a reader between the two statements sees "expired", never a gap.
            event_log.expire_before(conversation_id, batch[-1][1] + 1)
            Event.objects.filter(pk__in=[pk for pk, _ in batch]).delete()
            deleted += len(batch)


def prune_by_retention() -> PruneReport | None:
    """The beat task's job: prune past ``POPPY["RETENTION_SECONDS"]`` (None keeps all)."""
    retention = poppy_settings.RETENTION_SECONDS
    if retention is None:
        return None
    return prune_events(timedelta(seconds=float(retention)))


def orphaned_conversations() -> list[str]:
    """Conversations that need a writer and have none (see :mod:`poppy_django.engine.recovery`)."""
    return list(Conversation.objects.filter(lifecycle.orphans()).values_list("id", flat=True))


def reap() -> list[str]:
    """Re-dispatch orphaned conversations; the lease makes a duplicate dispatch harmless.

    Workers take orphans up by themselves (their recovery sweep); this is for a deployment
    that turned the sweep off (``SWEEP_SECONDS = None``), or for an operator in a hurry.
    """
    orphaned = orphaned_conversations()
    executor = poppy_settings.EXECUTOR
    for conversation_id in orphaned:
        executor.dispatch(conversation_id)
    _reap_parts()
    return orphaned


#: ``reap()``: re-dispatch what a part holds that no worker does, after a reap's
#: conversations. It checks its own settings.
Reaper = Callable[[], object]
#: What the parts that plug in re-dispatch when reaped, by name (the Operations extension:
#: confirmed operations no worker holds).
reapers: Registry[Reaper] = Registry("reapers")


def _reap_parts() -> None:
    for reap_part in reapers:
        reap_part()
