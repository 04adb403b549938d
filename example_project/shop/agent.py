"""The "support" Company Agent of Acme Outfitters and its tools."""

from __future__ import annotations

from typing import Any

from example_project.shop.models import Order
from poppy_django.agent import ActionFailed, CompanyAgent, ToolContext, register, tool
from poppy_django.agent.scripted import Rule, Script
from poppy_django.operations import OutcomeUnknown

STORE_HOURS = "Monday to Friday, 9:00 to 17:00 (UTC)"


@tool(kind="read", roles=["personal_agent"])
def store_hours(ctx: ToolContext) -> dict[str, Any]:
    """The store's opening hours."""
    return {"hours": STORE_HOURS, "summary": f"We are open {STORE_HOURS}."}


@tool(kind="read", roles=["scope:poppy:read"])
def list_orders(ctx: ToolContext) -> dict[str, Any]:
    """The signed-in account's orders."""
    orders = list(Order.objects.filter(account_id=ctx.account_id))
    listed = ", ".join(f"{order.id} ({order.status})" for order in orders)
    return {
        "orders": [
            {"id": order.id, "item": order.item, "status": order.status} for order in orders
        ],
        "summary": f"Your orders: {listed}." if orders else "You have no orders.",
    }


@tool(kind="action", roles=["scope:poppy:write"], summary="Cancel order {order_id}", operation=True)
def cancel_order(ctx: ToolContext, order_id: str) -> dict[str, Any]:
    """Cancel one of the account's orders that has not shipped."""
    order = Order.objects.select_for_update().filter(id=order_id, account_id=ctx.account_id).first()
    if order is None:
        raise ActionFailed(f"order {order_id} is not on this account")
    if order.status != Order.Status.PROCESSING:
        raise ActionFailed(f"order {order_id} is {order.status}")
    order.status = Order.Status.CANCELLED
    order.save(update_fields=["status"])
    return {"order_id": order.id, "status": order.status}


@tool(
    kind="action",
    roles=["scope:poppy:write"],
    summary="Email the receipt of order {order_id}",
    operation=True,
    # Low stakes: the User may let their agent confirm this under a standing permission.
    standing_permission=True,
)
def send_receipt(ctx: ToolContext, order_id: str) -> dict[str, Any]:
    """Email the receipt of one of the account's orders to the account's address."""
    order = Order.objects.filter(id=order_id, account_id=ctx.account_id).first()
    if order is None:
        raise ActionFailed(f"order {order_id} is not on this account")
    return {"order_id": order.id, "summary": f"The receipt of {order.id} is on its way."}


@tool(
    kind="action",
    roles=["scope:poppy:write"],
    summary="Refund order {order_id} to the card it was paid with",
    operation=True,
)
def refund_order(ctx: ToolContext, order_id: str) -> dict[str, Any]:
    """Ask the payment provider to refund one of the account's orders.

    Acme's (pretend) provider answers later: until it does, nobody knows whether the money
    moved, so the operation stays in progress (staff settle it with
    ``poppy_django.operations.service.settle``)."""
    if not Order.objects.filter(id=order_id, account_id=ctx.account_id).exists():
        raise ActionFailed(f"order {order_id} is not on this account")
    raise OutcomeUnknown("The payment provider has not confirmed the refund yet.")


@tool(kind="read", roles=["personal_agent"])
def order_status(ctx: ToolContext, order_id: str) -> dict[str, Any]:
    """An order's status by its number (like a public tracking page); shows an order card."""
    order = Order.objects.filter(id=order_id).first()
    status = order.status if order else "unknown"
    ctx.emit_component(
        "order_card", {"id": order_id, "status": status}, f"Order {order_id}: {status}."
    )
    return {"id": order_id, "status": status}


#: ORDER: a capital letter, a dash and digits (``A-1``).
ORDER = r"[A-Z]-\d+"

#: Acme's rules for the offline scripted model, after its built-in ``#fail``, ``#slow`` and
#: ``#history`` (settings: ``"MODEL": "scripted:example_project.shop.agent.SCRIPT"``). Other
#: tools rely on these answers, so text matching none of them is echoed (no by-name calls).
SCRIPT = Script(
    rules=[
        Rule(r"(?i)hours", "store_hours"),
        Rule(r"(?i)orders", "list_orders"),
        Rule(rf"cancel\s+(?P<order_id>{ORDER})", "cancel_order", reply=False),
        Rule(rf"status of\s+(?P<order_id>{ORDER})", "order_status", reply=False),
    ],
    call_tools_by_name=False,
)


def register_support_agent() -> None:
    register(
        CompanyAgent(
            name="support",
            instructions=(
                "You are the support agent of Acme Outfitters. Answer briefly. Use the tools "
                "for hours and orders; never guess an order's status."
            ),
            tools=[
                store_hours,
                list_orders,
                cancel_order,
                send_receipt,
                refund_order,
                order_status,
            ],
        )
    )
