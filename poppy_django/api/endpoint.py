"""The DRF base view of the conversation endpoint: the wire's JSON in and out, no thread held.

:class:`EndpointView` is a DRF ``APIView`` whose authentication, permission and throttle
classes default to ``POPPY``'s lists (the verifier-backed DPoP class, any verified caller,
per-User rates; a subclass sets DRF's class attributes as usual), whose one parser and
renderer speak the wire's JSON whatever the request's ``Content-Type`` and ``Accept`` say,
and whose exception handling answers every failure as the wire's ``{"error": ...}`` body.
The order of checks is the wire's: method, then authentication (before the body is read),
then permissions and throttles, then the view's own path id, then the body.

DRF's request cycle is synchronous; it runs whole in one worker thread per request (as the
ORM work needs one anyway). A view that must wait — a long-poll, or a POST with ``?wait`` —
returns a :class:`WaitingResponse` whose waiting runs afterwards on the event loop, so that
waiting readers hold no thread; a stream returns a ``StreamingHttpResponse`` whose body is
an async generator.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import Awaitable, Callable, Iterable, Mapping
from functools import cache
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from django.http import HttpRequest
from django.http.response import HttpResponseBase
from django.utils.module_loading import import_string
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.openapi import AutoSchema
from rest_framework import exceptions
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.parsers import BaseParser
from rest_framework.renderers import BaseRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from poppy_django import observe
from poppy_django.api.serializers import wire_error
from poppy_django.api.wire_errors import wire_error_response
from poppy_django.conf import poppy_settings
from poppy_django.errors import PoppyError, error_response
from poppy_django.threads import in_thread

logger = logging.getLogger("poppy_django.views")


class WireJSONRenderer(BaseRenderer):
    """JSON exactly as the wire has always been written (Django's ``JsonResponse`` bytes)."""

    media_type = "application/json"
    format = "json"
    charset = None

    def render(
        self,
        data: Any,
        accepted_media_type: str | None = None,
        renderer_context: Mapping[str, Any] | None = None,
    ) -> bytes:
        return json.dumps(data, cls=DjangoJSONEncoder).encode()


def _refuse_constant(name: str) -> Any:
    raise PoppyError("invalid_request", f"The body contains {name}, which is not JSON.")


class WireJSONParser(BaseParser):
    """Any body as JSON (the wire ignores ``Content-Type``), refused past the body limit.

    ``NaN`` and ``Infinity``, which Python's decoder would accept, are not JSON and refused;
    a blank body is ``{}`` (handoff and close may be empty).
    """

    media_type = "*/*"

    def parse(
        self,
        stream: Any,
        media_type: str | None = None,
        parser_context: Mapping[str, Any] | None = None,
    ) -> Any:
        limit = poppy_settings.MAX_BODY_BYTES
        raw = stream.read(limit + 1)
        if len(raw) > limit:
            raise PoppyError("request_too_large", f"Bodies are limited to {limit} bytes.")
        if not raw.strip():
            return {}
        try:
            return json.loads(raw, parse_constant=_refuse_constant)
        except (ValueError, UnicodeDecodeError) as exc:
            raise PoppyError("invalid_request", "The body is not valid JSON.") from exc
        except RecursionError as exc:  # e.g. a megabyte of "[": nested past what we parse
            raise PoppyError("invalid_request", "The body is nested too deeply.") from exc


class WireNegotiation(BaseContentNegotiation):
    """The wire answers JSON whatever the client accepts, and reads any body as JSON."""

    def select_parser(self, request: Request, parsers: Iterable[BaseParser]) -> BaseParser:
        return next(iter(parsers))

    def select_renderer(
        self, request: Request, renderers: Iterable[BaseRenderer], format_suffix: str | None = None
    ) -> tuple[BaseRenderer, str]:
        renderer = next(iter(renderers))
        return renderer, renderer.media_type


class WaitingResponse(Response):
    """A response whose data comes from waiting on the event loop, after the request's thread.

    ``wait`` is awaited for the data; ``cleanup`` runs once the wait ends, whatever happens
    (on the request's worker thread when the request was abandoned before DRF's cycle
    returned: it must be thread-safe).
    """

    def __init__(
        self,
        wait: Callable[[], Awaitable[Any]],
        *,
        status: int = 200,
        cleanup: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(None, status=status)
        self.wait = wait
        self.cleanup = cleanup


@cache
def _classes(entries: tuple[Any, ...]) -> list[Any]:
    return [import_string(entry) if isinstance(entry, str) else entry for entry in entries]


def configured(name: str) -> list[Any]:
    """The classes a ``POPPY`` list names, as import strings or classes (imported once)."""
    return _classes(tuple(getattr(poppy_settings, name)))


class PoppyDefault:
    """A DRF class-list attribute whose value is a ``POPPY`` list (``AUTHENTICATION_CLASSES``
    ...): the default of :class:`EndpointView`, replaced by any plain assignment in a subclass.

    On a view it asks the view's ``<attribute>_for_endpoint()`` (which reads ``POPPY``), so a
    subclass that overrides that older hook keeps working.
    """

    def __init__(self, setting: str) -> None:
        self.setting = setting
        self.hook = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.hook = f"{name}_for_endpoint"

    def __get__(self, instance: object, owner: type) -> list[Any]:
        if instance is None:
            return configured(self.setting)
        classes: list[Any] = getattr(instance, self.hook)()
        return classes


def method_not_allowed(allowed: str) -> HttpResponseBase:
    return error_response("method_not_allowed", f"Use {allowed}.", headers={"Allow": allowed})


class EndpointView(APIView):
    """A route of the conversation endpoint. Subclass to add behaviour (see docs/rest-framework).

    ``wire_method`` is the route's one method; any other is ``405`` with ``Allow`` before
    anything else is looked at, as the wire pins.
    """

    wire_method = "POST"
    #: The ``POPPY["THROTTLE_RATES"]`` key this route counts against (None: not throttled).
    throttle_scope: str | None = None

    parser_classes = [WireJSONParser]
    renderer_classes = [WireJSONRenderer]
    content_negotiation_class = WireNegotiation
    versioning_class = None
    #: The OpenAPI document comes from drf-spectacular whatever the project's default is.
    schema = AutoSchema()

    #: DRF's class attributes, as DRF users set them; by default the ``POPPY`` lists (the
    #: app's defaults, read at each request so ``override_settings`` applies). A subclass
    #: assigning one replaces the default for its routes.
    authentication_classes = PoppyDefault("AUTHENTICATION_CLASSES")
    permission_classes = PoppyDefault("PERMISSION_CLASSES")
    throttle_classes = PoppyDefault("THROTTLE_CLASSES")

    def authentication_classes_for_endpoint(self) -> list[Any]:
        """``POPPY["AUTHENTICATION_CLASSES"]`` (the older per-view hook; prefer the attribute)."""
        return configured("AUTHENTICATION_CLASSES")

    def permission_classes_for_endpoint(self) -> list[Any]:
        """``POPPY["PERMISSION_CLASSES"]`` (the older per-view hook; prefer the attribute)."""
        return configured("PERMISSION_CLASSES")

    def throttle_classes_for_endpoint(self) -> list[Any]:
        """``POPPY["THROTTLE_CLASSES"]`` (the older per-view hook; prefer the attribute)."""
        return configured("THROTTLE_CLASSES")

    @property
    def default_response_headers(self) -> dict[str, str]:
        return {}  # no Allow on every answer: the wire sends it with 405 only

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        if request.method != self.wire_method:
            raise _WrongMethod()
        self.request_id = observe.begin_request(request.headers.get("X-Request-ID"))
        super().initial(request, *args, **kwargs)

    def handle_exception(self, exc: Exception) -> HttpResponseBase:  # type: ignore[override]
        if isinstance(exc, _WrongMethod):
            return method_not_allowed(self.wire_method)
        if isinstance(exc, exceptions.ValidationError):  # a body serializer's first error
            return wire_error(exc.detail).response()
        return wire_error_response(exc, self.request)

    def finalize_response(  # type: ignore[override]
        self, request: Request, response: HttpResponseBase, *args: Any, **kwargs: Any
    ) -> HttpResponseBase:
        response = super().finalize_response(request, response, *args, **kwargs)  # type: ignore[arg-type]
        response.setdefault("Cache-Control", "no-store")
        request_id = getattr(self, "request_id", None)
        if request_id is not None:
            response["X-Request-ID"] = request_id
        if isinstance(response, Response) and not isinstance(response, WaitingResponse):
            response.render()  # in the request's thread, with the rest of the work
        return response

    def body(self, request: Request) -> Any:
        """The parsed body (read now: after authentication and the path id)."""
        return request.data

    @classmethod
    def as_view(  # type: ignore[override]
        cls, **initkwargs: Any
    ) -> Callable[..., Awaitable[HttpResponseBase]]:
        """An async view: DRF's cycle in one worker thread, then any waiting on the loop."""
        sync_view = super().as_view(**initkwargs)

        async def view(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
            handover = _Handover()
            cycle = asyncio.ensure_future(
                in_thread(handover.run, sync_view, request, *args, **kwargs)
            )
            try:
                # Shielded: a request cancelled (the client gone) while DRF's cycle runs in
                # its thread cannot stop the thread, which may still return a WaitingResponse
                # holding a waiting-read slot; the handover releases it then.
                response: HttpResponseBase = await asyncio.shield(cycle)
            except asyncio.CancelledError:
                handover.abandon()
                raise
            if isinstance(response, WaitingResponse):
                response = await _finish_waiting(response, request)
            return response

        return routed(view, cls, initkwargs)


def routed(
    view: Callable[..., Awaitable[HttpResponseBase]], cls: type, initkwargs: dict[str, Any]
) -> Callable[..., Awaitable[HttpResponseBase]]:
    """``view`` as Django routes a class-based view's (its class and arguments kept), with no
    login redirect (``LoginRequiredMiddleware``) and no CSRF check: callers send tokens."""
    view.cls = cls  # type: ignore[attr-defined]
    view.initkwargs = initkwargs  # type: ignore[attr-defined]
    view.login_required = False  # type: ignore[attr-defined]
    return csrf_exempt(view)


class _Handover:
    """DRF's cycle's response, handed from its thread to the request; a WaitingResponse
    that no one will wait on (the request abandoned: the client gone) is cleaned up by
    whichever side comes second, the thread returning it or the request abandoning it.

    Not by a callback on the cycle's task: the loop may end before the thread returns (a
    test client's loop ends with its request, a server's at its shutdown), its tasks
    cancelled, and the response the thread returned after that was never cleaned up: a
    long-poll's waiting-read slot stayed held, counted against every later waiting read.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._abandoned = False
        self._returned: HttpResponseBase | None = None

    def run(
        self, cycle: Callable[..., HttpResponseBase], *args: Any, **kwargs: Any
    ) -> HttpResponseBase:
        """DRF's cycle, in its thread; its response kept unless the request was abandoned."""
        response = cycle(*args, **kwargs)
        with self._lock:
            if not self._abandoned:
                self._returned = response
                return response
        _clean_up(response)
        return response

    def abandon(self) -> None:
        """The request was cancelled: a response the cycle already returned is cleaned up
        now, one it returns later when it does."""
        with self._lock:
            self._abandoned = True
            response, self._returned = self._returned, None
        if response is not None:
            _clean_up(response)


def _clean_up(response: HttpResponseBase) -> None:
    if isinstance(response, WaitingResponse) and response.cleanup is not None:
        response.cleanup()


class _WrongMethod(Exception):
    """Raised before DRF looks at anything: the wire answers 405 first."""


async def _finish_waiting(response: WaitingResponse, request: HttpRequest) -> HttpResponseBase:
    try:
        response.data = await response.wait()
    except Exception as exc:
        failed = wire_error_response(exc, request)
        for name in ("Cache-Control", "X-Request-ID"):
            if name in response:
                failed[name] = response[name]
        return failed
    finally:
        if response.cleanup is not None:
            response.cleanup()
    response.render()
    return response
