"""Identifiers: the wire's id alphabet, company ids, and event ids that are also cursors.

The ids the company writes into conversations (conversations, events, messages) are
minted here.

An event id encodes its conversation and its sequence number (``evt_<key>_<seq>``), so a
cursor is checked and turned into an index range scan without a lookup, and a cursor into
pruned events is recognised without keeping the pruned rows.
"""

from __future__ import annotations

import hashlib
import re
import secrets

ID_PATTERN = re.compile(r"[A-Za-z0-9_-]{1,256}")
_SEQ_PATTERN = re.compile(r"[1-9][0-9]{0,17}")


def is_valid_id(value: object) -> bool:
    return isinstance(value, str) and ID_PATTERN.fullmatch(value) is not None


def _token(nbytes: int = 16) -> str:
    # token_hex keeps ids inside the alphabet with no "_" that could confuse parsing.
    return secrets.token_hex(nbytes)


def new_conversation_id() -> str:
    return f"cnv_{_token()}"


def new_operation_id() -> str:
    """An Operations extension operation id (``op_``…), inside the wire's id alphabet."""
    return f"op_{_token()}"


def event_id(conversation_id: str, seq: int) -> str:
    return f"evt_{conversation_id.removeprefix('cnv_')}_{seq}"


def parse_cursor(conversation_id: str, cursor: str) -> int | None:
    """The sequence number a cursor names in this conversation, or None if it never could."""
    if not is_valid_id(cursor) or not cursor.startswith("evt_"):
        return None
    key, _, seq = cursor[4:].rpartition("_")
    if key != conversation_id.removeprefix("cnv_") or not _SEQ_PATTERN.fullmatch(seq):
        return None
    return int(seq)


def new_company_message_id() -> str:
    """A fresh id for a company message that no retry can repeat (a person's, a notice)."""
    return f"msg_{_token(12)}"


def company_message_id(conversation_id: str, turn_id: str) -> str:
    """A stable id for the company message a turn writes, so a retried turn writes it once."""
    digest = hashlib.sha256(f"{conversation_id}:{turn_id}".encode()).hexdigest()[:24]
    return f"msg_{digest}"


def anonymous_actor_id(client_id: str, user_id: str) -> str:
    """``poppy:<hash>``: stable per personal agent and User, never an account."""
    digest = hashlib.sha256(f"{client_id}\x00{user_id}".encode()).hexdigest()[:32]
    return f"poppy:{digest}"
