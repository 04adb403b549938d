"""The operations endpoint (Operations v1 §5): read, confirm and cancel one operation by id.

The same DRF machinery as the conversation endpoint (:class:`~poppy_django.api.endpoint.
EndpointView`): the token verified before the body is read, the wire's JSON errors, no
redirect, ``no-store``. A confirm answers once the confirmation is recorded; it then waits
(holding no thread, like a long-poll) up to ``CONFIRM_WAIT_SECONDS`` for the worker to
finish, so a quick action answers ``succeeded`` and a slow one ``in_progress`` with
``Retry-After`` (the personal agent reads it back by id).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from django.http import Http404
from rest_framework.request import Request
from rest_framework.response import Response

from poppy_django.api.endpoint import EndpointView, WaitingResponse
from poppy_django.api.views import principal_of
from poppy_django.operations import service
from poppy_django.operations.models import FINAL_STATES, Operation, OperationState
from poppy_django.operations.options import options
from poppy_django.operations.schema import operations_schema
from poppy_django.threads import in_thread

#: How often a confirm's answer looks for the worker's outcome while it waits.
POLL_SECONDS = 0.1


def _answer(operation: Operation) -> Response:
    headers = {}
    if operation.state == OperationState.IN_PROGRESS:
        headers["Retry-After"] = str(options().retry_after_seconds)
    return Response(operation.to_wire(), headers=headers)


class _OperationsView(EndpointView):
    """A route of the operations endpoint: ``404 not_found`` while the extension is off.

    In the OpenAPI document with the operation's schema (:mod:`poppy_django.operations.
    schema`).
    """

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        if not options().enabled:
            raise Http404
        super().initial(request, *args, **kwargs)


class OperationView(_OperationsView):
    """``GET {operations}/{id}``: the operation as it is now (after a lost answer, too)."""

    wire_method = "GET"

    @operations_schema("read")
    def get(self, request: Request, operation_id: str) -> Response:
        return _answer(service.read(principal_of(request), operation_id))


class ConfirmView(_OperationsView):
    """``POST {operations}/{id}/confirm``: ``{"revision", "approved_by"}``, at most once."""

    wire_method = "POST"
    throttle_scope = "operation_confirm"

    @operations_schema("confirm")
    def post(self, request: Request, operation_id: str) -> Response:
        principal = principal_of(request)
        service.read(principal, operation_id)  # an unknown or foreign id before the body
        operation = service.confirm(principal, operation_id, self.body(request))
        wait = options().confirm_wait_seconds
        if operation.state != OperationState.IN_PROGRESS or wait <= 0:
            return _answer(operation)

        async def outcome() -> dict[str, Any]:
            current = await settled(operation.operation_id, wait)
            if current.state == OperationState.IN_PROGRESS:
                answer["Retry-After"] = str(options().retry_after_seconds)
            return current.to_wire()

        answer = WaitingResponse(outcome)
        return answer


async def settled(operation_id: str, wait: float) -> Operation:
    """The operation once final or its outcome unknown, or as it is when the wait ends."""
    deadline = time.monotonic() + wait
    while True:
        current = await in_thread(Operation.objects.get, pk=operation_id)
        if current.state in FINAL_STATES or current.outcome_unknown or time.monotonic() >= deadline:
            return current
        await asyncio.sleep(POLL_SECONDS)


class CancelView(_OperationsView):
    """``POST {operations}/{id}/cancel``: a proposal is cancelled; otherwise unchanged."""

    wire_method = "POST"

    @operations_schema("cancel")
    def post(self, request: Request, operation_id: str) -> Response:
        principal = principal_of(request)
        service.read(principal, operation_id)
        self.body(request)  # only malformed JSON is refused; the content is ignored
        return _answer(service.cancel(principal, operation_id))


class NotFoundView(EndpointView):
    """Any other path under the operations endpoint: ``404 not_found``."""

    schema = None  # type: ignore[assignment]

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        raise Http404
