"""How action outcomes are worded in a reply's text (a message must make sense without data)."""

from __future__ import annotations

from typing import Any


def format_action(action: dict[str, Any], texts: dict[str, str]) -> str:
    """The default ``POPPY["ACTION_FORMATTER"]``: one sentence per action outcome."""
    summary = str(action.get("summary") or action.get("tool") or "the action")
    fields = {
        "summary": summary,
        "summary_lower": summary[:1].lower() + summary[1:],
        "tool": action.get("tool", ""),
        "error": action.get("error") or "unknown error",
    }
    key = {
        "succeeded": "action_succeeded",
        "failed": "action_failed",
        "rejected": "action_rejected",
        "awaiting_approval": "action_pending_approval",
        "operation_proposed": "action_operation_proposed",
    }.get(str(action.get("status")), "action_failed")
    return texts[key].format(**fields)
