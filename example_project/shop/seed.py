"""Acme's seed orders: acct-1 (A-1 shipped, A-2 processing) and acct-2 (B-1 shipped)."""

from __future__ import annotations

from typing import Any

SEED = [
    ("A-1", "acct-1", "Trail running shoes", "shipped"),
    ("A-2", "acct-1", "Rain jacket", "processing"),
    ("B-1", "acct-2", "Camping stove", "shipped"),
]


def seed_orders(order_model: Any) -> None:
    """Create or reset the seed orders (the migration passes its historical model)."""
    for order_id, account_id, item, status in SEED:
        order_model.objects.update_or_create(
            id=order_id, defaults={"account_id": account_id, "item": item, "status": status}
        )
