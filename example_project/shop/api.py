"""Acme's own orders API for personal agents: DRF views that accept Poppy Session Tokens.

The account is ``request.user.account_id`` (the verifier's principal is ``request.auth``);
``HasPoppyScope("orders:read")`` lets in only a signed-in User whose token carries that
scope, and answers others with the wire's 401/403 error bodies and DPoP challenges.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import generics, serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from example_project.shop.models import Order
from poppy_django.operations.api import propose_response
from poppy_django.permissions import HasPoppyScope, IsPoppyCaller
from poppy_django.rest_framework import DPoPAuthentication, IdempotentWrites, exception_handler


class OrderSerializer(serializers.ModelSerializer):
    class Meta:
        model = Order
        fields = ["id", "item", "status"]


class AccountOrders(generics.GenericAPIView[Order]):
    """Session Token authentication, the orders scope, and only the caller's account's orders."""

    authentication_classes = [DPoPAuthentication]
    permission_classes = [HasPoppyScope("orders:read")]  # type: ignore[list-item]
    serializer_class = OrderSerializer

    def get_exception_handler(self) -> Callable[..., Any]:
        return exception_handler

    def get_queryset(self) -> QuerySet[Order]:
        return Order.objects.filter(account_id=getattr(self.request.user, "account_id", None))


class OrderList(AccountOrders, generics.ListAPIView[Order]):
    """``GET /api/orders``: the signed-in account's orders."""

    pagination_class = None


class OrderDetail(AccountOrders, generics.RetrieveAPIView[Order]):
    """``GET /api/orders/<id>``: one of the account's orders (another account's is 404)."""

    lookup_url_kwarg = "order_id"


class CancelOrder(IdempotentWrites, APIView):
    """``POST /api/orders/<id>/cancel``: proposes cancelling the order, as an Operation.

    Answers ``202 {"operation": ...}``: nothing is cancelled until the User confirms this
    revision at the operations endpoint (the same operation the Company Agent proposes for
    "cancel <id>" in a conversation).
    """

    authentication_classes = [DPoPAuthentication]
    permission_classes = [IsPoppyCaller]

    def get_exception_handler(self) -> Callable[..., Any]:
        return exception_handler

    @extend_schema(
        request=None,
        responses={202: OpenApiResponse(description="The proposed operation: {operation}")},
    )
    def post(self, request: Request, order_id: str) -> Response:
        return propose_response(request, "cancel_order", {"order_id": order_id})


class SendReceipt(CancelOrder):
    """``POST /api/orders/<id>/receipt``: proposes emailing the order's receipt, as an
    Operation the User may let a standing permission confirm (``user_approval_required``
    false: ``send_receipt`` opts in)."""

    @extend_schema(
        request=None,
        responses={202: OpenApiResponse(description="The proposed operation: {operation}")},
    )
    def post(self, request: Request, order_id: str) -> Response:
        return propose_response(request, "send_receipt", {"order_id": order_id})


class RefundOrder(CancelOrder):
    """``POST /api/orders/<id>/refund``: proposes refunding the order, as an Operation whose
    outcome stays unknown once confirmed (``in_progress``) until the provider answers."""

    @extend_schema(
        request=None,
        responses={202: OpenApiResponse(description="The proposed operation: {operation}")},
    )
    def post(self, request: Request, order_id: str) -> Response:
        return propose_response(request, "refund_order", {"order_id": order_id})
