"""Signals for integrators: the moments that matter, sent after they are durable.

Every signal is sent with ``sender=Conversation`` (the model class) and the keyword
arguments documented on it. Receivers run in the process that caused the moment (a web
process, or the worker running a turn); exceptions in receivers are logged, not raised.
"""

from __future__ import annotations

from django.dispatch import Signal

#: A personal agent started a conversation. ``conversation_id``, ``client_id``, ``direct``.
conversation_started = Signal()
#: A user message was recorded. ``conversation_id``, ``message_id``, ``message`` (the wire
#: dict; never logged), ``starts_turn``.
message_received = Signal()
#: A turn began. ``conversation_id``, ``turn_id``, ``message_ids`` (the user messages it
#: answers).
turn_started = Signal()
#: A turn wrote its outcome. ``conversation_id``, ``turn_id``, ``message_id``, ``duration``.
turn_finished = Signal()
#: A turn failed and said so. ``conversation_id``, ``turn_id``, ``error``.
turn_failed = Signal()
#: A worker lost its lease mid-turn. ``conversation_id``, ``turn_id``.
lease_lost = Signal()
#: An action ran, was rejected, or awaits staff approval. ``conversation_id``, ``tool``,
#: ``status``, ``summary``.
action_executed = Signal()
#: A handoff was asked for. ``conversation_id``, ``initiator`` ("personal_agent" |
#: "company_agent"), ``outcome`` ("queued" | "joined" | "unavailable" | "no_hook").
handoff_requested = Signal()
#: A handoff waits for a person (queued on the desk): wire it to e-mail or chat to tell the
#: team (docs/signals.md has a recipe). ``conversation_id``; ``initiator``
#: ("personal_agent" | "company_agent"); ``assignee`` (the staff member's username the
#: assign hook gave it to, "" for whoever joins first); ``reason`` (the Company Agent's
#: reason, "" when the personal agent asked; may quote the User: never logged).
handoff_waiting = Signal()
#: A queued handoff no one joined within ``HANDOFF_MAX_WAIT_SECONDS`` went back to the
#: Company Agent. ``conversation_id``.
handoff_timed_out = Signal()
#: A customer asked for a person and got nobody: answered at once that no one could take it
#: (``outcome`` "unavailable") or it waited in vain (``outcome`` "missed": timed out, or given
#: back). Wire it to the company's own channel (e-mail, CRM) to follow the customer up
#: (docs/signals.md). ``conversation_id``; ``outcome``; ``reason`` (what the customer was
#: told, "timed_out" or "given back"); ``staff`` (whom it waited for, or who said no one
#: could take it; "" for no one); ``team`` ("" for the whole desk); ``account_id`` (the
#: customer's account, "" when unknown; never logged).
handoff_missed = Signal()
#: A conversation changed hands on the desk. ``conversation_id``; ``assignee`` (who has it
#: now, "" for no one); ``previous`` (who had it, "" for no one); ``by`` (who did it);
#: ``how`` ("assigned": a waiting handoff given to a teammate, or taken back with
#: ``assignee`` ""; "transferred": given by its holder, or to a team; "took_over": taken
#: from ``previous``; "reassigned": it waited for ``previous``, who went away or left).
conversation_assigned = Signal()
#: A person joined / left. ``conversation_id``, ``by``.
human_joined = Signal()
human_left = Signal()
#: The company asked for the User. ``conversation_id``, ``reason``.
user_requested = Signal()
#: A Direct Conversation opened / closed. ``conversation_id``, ``parent_id``.
direct_opened = Signal()
direct_closed = Signal()
#: A conversation closed. ``conversation_id``, ``by`` ("personal_agent" | "company").
conversation_closed = Signal()
