"""``PoppyEndpointMiddleware``: the endpoint's own path through Django's middleware.

Put it first in ``MIDDLEWARE``: it measures every request of every route
(:func:`~poppy_django.observe.served.request_measured`, ``poppy_request_duration_seconds``),
and traces the endpoint's. Every other path goes through the whole stack as usual. For
the endpoint's paths it runs the middleware listed after it **except** those named in
``POPPY["SKIP_MIDDLEWARE"]`` (by default sessions, authentication, CSRF and messages: the
endpoint authenticates by token, is CSRF-exempt and never uses sessions, users or messages,
and each of those synchronous middleware costs thread hops on every request), then resolves
the URL and calls the view. Security headers, CORS, tracing and error reporting middleware
therefore apply to the endpoint unless the project names them.

The chain follows Django's documented middleware protocol (``sync_capable`` /
``async_capable``, ``process_view``, ``process_exception``, ``MiddlewareNotUsed``), and
an exception a middleware raises is answered as the wire's JSON error, as is any non-JSON
error answer: every failure on the endpoint is JSON with ``error``, never an HTML page.
Consecutive hook-only ``MiddlewareMixin`` middleware share their thread hops: one for all
their ``process_request`` hooks, one for all their ``process_response`` hooks, in Django's
order, where Django's own ``__acall__`` would take one per hook. Those named in
``POPPY["NONBLOCKING_MIDDLEWARE"]`` (by default Django's security, common and clickjacking
middleware, whose hooks only read the request and set headers) take no hop at all: their
hooks run on the event loop, as an async middleware's would.
"""

from __future__ import annotations

import functools
import itertools
import logging
import sys
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from asgiref.sync import async_to_sync, iscoroutinefunction, markcoroutinefunction, sync_to_async
from django.conf import settings
from django.core.exceptions import DisallowedHost, ImproperlyConfigured, MiddlewareNotUsed
from django.core.signals import got_request_exception
from django.dispatch import receiver
from django.http import HttpRequest, HttpResponse
from django.http.response import HttpResponseBase
from django.urls import (
    NoReverseMatch,
    Resolver404,
    get_script_prefix,
    get_urlconf,
    resolve,
    reverse,
)
from django.utils.deprecation import MiddlewareMixin
from django.utils.module_loading import import_string

from poppy_django.addresses import is_endpoint_path
from poppy_django.api.setup_problems import host_refusal, server_error_description
from poppy_django.api.wire_errors import wire_error_response
from poppy_django.conf import endpoint_prefix, poppy_settings
from poppy_django.engine.dispatch import executor_is_inline
from poppy_django.errors import error_response
from poppy_django.observe.served import endpoint_request, request_measured
from poppy_django.threads import on_request_thread

logger = logging.getLogger("poppy_django.views")

_CODE_OF_STATUS = {
    400: "invalid_request",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    413: "request_too_large",
}

Handler = Callable[[HttpRequest], HttpResponseBase | Awaitable[HttpResponseBase]]
AsyncHandler = Callable[[HttpRequest], Awaitable[HttpResponseBase]]
AsyncHook = Callable[..., Awaitable[HttpResponseBase | None]]


def on_endpoint(request: HttpRequest) -> bool:
    return is_endpoint_path(request.path_info)


#: The documents personal agents read before anything else (``poppy.json``, the OAuth
#: metadata, the keys).
_WELL_KNOWN = "/.well-known/"
#: The authority's routes a personal agent calls (its pages, for people, answer HTML).
AGENT_ROUTES = ("token", "revoke", "device", "jwks", "browser-session", "mediated")


@functools.cache
def _agent_paths(urlconf: str | None) -> tuple[str, ...]:
    """The paths of :data:`AGENT_ROUTES` in this URLconf (none without the authority's)."""
    found = []
    for name in AGENT_ROUTES:
        try:
            found.append(reverse(f"poppy_authority:{name}", urlconf=urlconf))
        except NoReverseMatch:
            continue
    return tuple(found)


def on_agent_route(request: HttpRequest) -> bool:
    """A route a personal agent calls besides the endpoint: ``/.well-known/…`` and the
    authority's (its token endpoint, keys, device and sign-in calls)."""
    path = request.path_info
    if path.startswith(_WELL_KNOWN):
        return True
    prefix = get_script_prefix().rstrip("/")
    return any(
        path == (known := full.removeprefix(prefix)) or path.startswith(known + "/")
        for full in _agent_paths(get_urlconf())
    )


def _under_test_kit() -> AbstractContextManager[None]:
    """The request's database work on the request's own thread, when the test answers the
    turns on its own (the test kit's ``InlineExecutor``).

    An ``async def`` test of Django's runs its thread-sensitive work on the test's thread,
    whose connection holds the ``TestCase``'s transaction: a message written there is
    rolled back with the test, SQLite has one writer, and no other thread's connection
    outlives the test (PostgreSQL would refuse to drop the test database).
    """
    if executor_is_inline():
        return on_request_thread()
    return nullcontext()


def _host_refused(request: HttpRequest) -> HttpResponseBase | None:
    """A request for a host not in ``ALLOWED_HOSTS``: the JSON error saying so (Django's own
    answer is an HTML 400 that names nothing a personal agent can show)."""
    try:
        request.get_host()
    except DisallowedHost as exc:
        return error_response("invalid_request", host_refusal(exc))
    return None


class PoppyEndpointMiddleware:
    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Handler) -> None:
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)
        self._view_hooks: list[AsyncHook] = []
        self._exception_hooks: list[AsyncHook] = []
        self._endpoint = self._chain(self._middleware_after_this())

    def __call__(self, request: HttpRequest) -> HttpResponseBase | Awaitable[HttpResponseBase]:
        if self.is_async:
            return self._acall(request)
        if on_endpoint(request):
            with on_request_thread(), endpoint_request(request) as served:
                return served.answered(as_json(async_to_sync(self._endpoint)(request)))
        with request_measured(request) as served:  # every other route: measured here too
            return served.answered(self._elsewhere(request))

    def _elsewhere(self, request: HttpRequest) -> HttpResponseBase:
        if not on_agent_route(request):
            response = self.get_response(request)
            assert isinstance(response, HttpResponseBase)
            return response
        if (refused := _host_refused(request)) is not None:
            return refused
        answered = self.get_response(request)
        assert isinstance(answered, HttpResponseBase)
        return as_json(answered, request)

    async def _acall(self, request: HttpRequest) -> HttpResponseBase:
        if on_endpoint(request):
            with _under_test_kit(), endpoint_request(request) as served:
                return served.answered(as_json(await self._endpoint(request)))
        with request_measured(request) as served:
            return served.answered(await self._aelsewhere(request))

    async def _aelsewhere(self, request: HttpRequest) -> HttpResponseBase:
        if not on_agent_route(request):
            response: HttpResponseBase = await self.get_response(request)  # type: ignore[misc]
            return response
        if (refused := _host_refused(request)) is not None:
            return refused
        return as_json(await self.get_response(request), request)  # type: ignore[misc]

    def _middleware_after_this(self) -> list[str]:
        """``MIDDLEWARE`` after this one, less what ``SKIP_MIDDLEWARE`` names."""
        skipped = poppy_settings.SKIP_MIDDLEWARE
        listed = list(settings.MIDDLEWARE)
        for index, path in enumerate(listed):
            factory = import_string(path)
            if isinstance(factory, type) and issubclass(factory, PoppyEndpointMiddleware):
                return [later for later in listed[index + 1 :] if later not in skipped]
        return []  # instantiated outside MIDDLEWARE (a test): the view alone

    def _chain(self, paths: list[str]) -> AsyncHandler:
        """The kept middleware around the view, built as Django builds its own handler, except
        that a run of hook-only ``MiddlewareMixin`` middleware shares its thread hops (or,
        named non-blocking, takes none)."""
        on_loop = _nonblocking_classes()
        handler: Handler = _answering_exceptions(self._view, is_async=True)
        handler_is_async = True
        run: list[MiddlewareMixin] = []  # hook-only middleware, outermost first
        for path in reversed(paths):
            factory = import_string(path)
            can_async = getattr(factory, "async_capable", False)
            if not can_async and not getattr(factory, "sync_capable", True):
                raise ImproperlyConfigured(f"Middleware {path} must be sync or async capable.")
            # What this middleware calls next: the handler, inside the run of hook-only
            # middleware collected so far (kept apart from the handler until a middleware
            # that is not hook-only wraps them).
            inner, inner_is_async = handler, handler_is_async
            if run:
                inner = _hooks_around(
                    run, _adapt(handler, handler_is_async, to_async=True), on_loop
                )
                inner_is_async = True
            try:
                instance = factory(_adapt(inner, inner_is_async, to_async=can_async))
            except MiddlewareNotUsed:
                continue
            if hasattr(instance, "process_view"):
                self._view_hooks.insert(0, _to_async(instance.process_view))
            if hasattr(instance, "process_exception"):
                self._exception_hooks.append(_to_async(instance.process_exception))
            if _hooks_only(instance):
                run.insert(0, instance)
                continue
            handler = _answering_exceptions(instance, is_async=can_async)
            handler_is_async, run = can_async, []
        if run:
            handler = _hooks_around(run, _adapt(handler, handler_is_async, to_async=True), on_loop)
            handler_is_async = True
        endpoint = _adapt(handler, handler_is_async, to_async=True)
        return endpoint  # type: ignore[return-value]

    async def _view(self, request: HttpRequest) -> HttpResponseBase:
        """The endpoint's view (every endpoint view is async), after the ``process_view``s."""
        try:
            match = resolve(request.path_info)
        except Resolver404:
            _tell_unrouted_once()
            return error_response("not_found", "There is nothing at this path.")
        request.resolver_match = match
        for hook in self._view_hooks:
            answered = await hook(request, match.func, match.args, match.kwargs)
            if answered is not None:
                return answered
        try:
            response: HttpResponseBase = await match.func(request, *match.args, **match.kwargs)
        except Exception as exc:
            for hook in self._exception_hooks:
                answered = await hook(request, exc)
                if answered is not None:
                    return answered
            raise
        return response


@functools.cache
def _tell_unrouted_once() -> None:
    """The endpoint's paths are not in the URLconf at all (``poppy_django.urls`` routes every
    path below the endpoint): said once per process, with the fix (check E012)."""
    logger.error(
        "poppy: %s is not in the URLconf (%s), yet poppy.json sends personal agents there: add "
        'path("", include("poppy_django.urls")) to your urlpatterns (check poppy_django.E012).',
        endpoint_prefix(),
        settings.ROOT_URLCONF,
    )


def _nonblocking_classes() -> set[type]:
    """The classes ``POPPY["NONBLOCKING_MIDDLEWARE"]`` names."""
    classes = set()
    for path in poppy_settings.NONBLOCKING_MIDDLEWARE:
        try:
            classes.add(import_string(path))
        except ImportError as exc:
            raise ImproperlyConfigured(
                f'POPPY["NONBLOCKING_MIDDLEWARE"] names {path!r}, which cannot be imported: {exc}'
            ) from exc
    return classes


def _adapt(handler: Handler, is_async: bool, *, to_async: bool) -> Handler:
    if is_async == to_async:
        return handler
    if to_async:
        return sync_to_async(handler, thread_sensitive=True)  # type: ignore[arg-type]
    return async_to_sync(handler)  # type: ignore[arg-type]


def _hooks_only(instance: object) -> bool:
    """A ``MiddlewareMixin`` whose behaviour is all in its hooks (Django's own ``__call__``
    and ``__acall__``), such as Django's security, common and clickjacking middleware."""
    kind = type(instance)
    return (
        isinstance(instance, MiddlewareMixin)
        and kind.__call__ is MiddlewareMixin.__call__
        and kind.__acall__ is MiddlewareMixin.__acall__  # type: ignore[attr-defined]
    )


def _hooks_around(run: list[MiddlewareMixin], inner: Handler, on_loop: set[type]) -> AsyncHandler:
    """A run of hook-only middleware (outermost first) around ``inner``: each stretch of it
    whose classes are all named non-blocking runs its hooks on the loop, each other stretch
    in two thread hops (:func:`_hooks_together`)."""
    handler = inner
    stretches = itertools.groupby(run, key=lambda middleware: type(middleware) in on_loop)
    for loop_safe, stretch in reversed([(key, list(group)) for key, group in stretches]):
        handler = _hooks_together(stretch, handler, in_thread=not loop_safe)
    return handler  # type: ignore[return-value]


def _hooks_together(run: list[MiddlewareMixin], inner: Handler, *, in_thread: bool) -> AsyncHandler:
    """A run of hook-only middleware (outermost first) around ``inner``: every
    ``process_request``, then ``inner``, then every ``process_response``, each side in one
    thread hop (``in_thread``) or on the loop. Django's ``__acall__`` takes a hop per hook;
    the order and answers are the same as its nesting: a hook's answer or exception (as its
    JSON answer, made where the hook ran) skips what is inside it, and the middleware entered
    still see the response on its way out."""
    requests = _hook_side(_process_requests, in_thread=in_thread)
    responses = _hook_side(_process_responses, in_thread=in_thread)
    asks = any(hasattr(middleware, "process_request") for middleware in run)

    async def handle(request: HttpRequest) -> HttpResponseBase:
        entered, response = await requests(run, request) if asks else (run, None)
        if response is None:
            response = await inner(request)  # type: ignore[misc]
        if any(hasattr(middleware, "process_response") for middleware in entered):
            response = await responses(entered, request, response)
        assert isinstance(response, HttpResponseBase)
        return response

    return handle


def _hook_side(hooks: Callable[..., Any], *, in_thread: bool) -> Callable[..., Awaitable[Any]]:
    """One side of a run's hooks as a coroutine: in one thread hop, or on the loop."""
    if in_thread:
        return sync_to_async(hooks, thread_sensitive=True)

    async def on_loop(*args: Any) -> Any:
        return hooks(*args)

    return on_loop


def _process_requests(
    run: list[MiddlewareMixin], request: HttpRequest
) -> tuple[list[MiddlewareMixin], HttpResponseBase | None]:
    """The middleware entered (outermost first), and the answer of one that answered."""
    for index, middleware in enumerate(run):
        hook = getattr(middleware, "process_request", None)
        if hook is None:
            continue
        try:
            answered = hook(request)
        except Exception as exc:
            return run[:index], exception_response(request, exc)
        if answered is not None:
            return run[: index + 1], answered
    return run, None


def _process_responses(
    entered: list[MiddlewareMixin], request: HttpRequest, response: HttpResponseBase
) -> HttpResponseBase:
    for middleware in reversed(entered):
        hook = getattr(middleware, "process_response", None)
        if hook is None:
            continue
        try:
            response = hook(request, response)
        except Exception as exc:
            response = exception_response(request, exc)
    return response


def _to_async(hook: Callable[..., Any]) -> AsyncHook:
    if iscoroutinefunction(hook):
        return hook
    return sync_to_async(hook, thread_sensitive=True)


def _answering_exceptions(handler: Handler, *, is_async: bool) -> Handler:
    """What a middleware hands on never raises: an exception becomes its JSON answer (as
    Django's own chain turns exceptions into responses between middleware)."""
    if is_async:

        async def answer_async(request: HttpRequest) -> HttpResponseBase:
            try:
                return await handler(request)  # type: ignore[misc]
            except Exception as exc:
                return await sync_to_async(exception_response, thread_sensitive=False)(request, exc)

        return answer_async

    def answer(request: HttpRequest) -> HttpResponseBase:
        try:
            response = handler(request)
        except Exception as exc:
            return exception_response(request, exc)
        assert isinstance(response, HttpResponseBase)
        return response

    return answer


def exception_response(request: HttpRequest, exc: Exception) -> HttpResponseBase:
    """What a middleware raised, as the wire's JSON error (:func:`wire_error_response`); an
    unexpected exception is also sent to ``got_request_exception``, as Django does."""
    return wire_error_response(exc, request)


#: The request attribute where :func:`_keep_exception` puts a view's unexpected exception.
_FAILED_WITH = "_poppy_failed_with"


@receiver(got_request_exception)
def _keep_exception(sender: Any, request: HttpRequest | None = None, **kwargs: Any) -> None:
    """Django turned an exception into its HTML 500 (and logged it, under
    ``django.request``): keep it, so a route an agent calls can say what it was a mistake of."""
    if request is not None:
        setattr(request, _FAILED_WITH, sys.exc_info()[1])


def as_json(response: HttpResponseBase, request: HttpRequest | None = None) -> HttpResponseBase:
    """A non-JSON error answer on a route an agent calls becomes the wire's JSON error; a
    500 names the set-up mistake behind it, if it was one."""
    if response.status_code < 400 or response.get("Content-Type", "").startswith(
        "application/json"
    ):
        return response
    code = _CODE_OF_STATUS.get(response.status_code, "server_error")
    failed_with = getattr(request, _FAILED_WITH, None)
    hint = server_error_description(failed_with) if failed_with is not None else None
    replaced = error_response(code, hint if code == "server_error" else None)
    if isinstance(response, HttpResponse):
        # The same response, its body replaced: the middleware's headers (HSTS, CORS...)
        # stay, and Django, which logged it, does not log it again as a new one.
        response.content = replaced.content
        response.headers.pop("Content-Length", None)
        for name, value in replaced.items():
            response[name] = value
        response["Cache-Control"] = "no-store"
        return response
    for name, value in response.items():
        if name.lower() not in ("content-type", "content-length"):
            replaced[name] = value
    replaced["Cache-Control"] = "no-store"
    return replaced
