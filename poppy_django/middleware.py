"""``PoppyEndpointMiddleware``: the endpoint's own short path through Django.

Put it first in ``MIDDLEWARE``. For the endpoint's paths it resolves the URL and calls the
view itself, skipping the middleware after it: the endpoint authenticates by token, is
CSRF-exempt and never uses sessions, users or messages, while each of those synchronous
middleware costs thread hops on every request (and, for a waiting reader, the thread they
pin). Every other path goes through the whole stack as usual.

It also keeps the wire's promise that every failure on the endpoint is JSON with ``error``,
never an HTML page, even when something before the views refuses the request.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from asgiref.sync import async_to_sync, iscoroutinefunction, markcoroutinefunction
from django.http import HttpRequest
from django.http.response import HttpResponseBase
from django.urls import Resolver404, resolve

from poppy_django.conf import poppy_settings
from poppy_django.errors import error_response

_CODE_OF_STATUS = {
    400: "invalid_request",
    404: "not_found",
    405: "method_not_allowed",
    413: "request_too_large",
}

Handler = Callable[[HttpRequest], HttpResponseBase | Awaitable[HttpResponseBase]]


def is_endpoint_path(path_info: str) -> bool:
    """Whether a path (below the script prefix) is the endpoint's or under it."""
    endpoint = "/" + str(poppy_settings.PATH).strip("/")
    return path_info == endpoint or path_info.startswith(endpoint + "/")


def on_endpoint(request: HttpRequest) -> bool:
    return is_endpoint_path(request.path_info)


class PoppyEndpointMiddleware:
    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Handler) -> None:
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> HttpResponseBase | Awaitable[HttpResponseBase]:
        if self.is_async:
            return self._acall(request)
        if on_endpoint(request):
            return as_json(async_to_sync(self._serve)(request))
        response = self.get_response(request)
        assert isinstance(response, HttpResponseBase)
        return response

    async def _acall(self, request: HttpRequest) -> HttpResponseBase:
        if on_endpoint(request):
            return as_json(await self._serve(request))
        response = await self.get_response(request)  # type: ignore[misc]
        return response

    async def _serve(self, request: HttpRequest) -> HttpResponseBase:
        """The endpoint's view, called directly (every endpoint view is async)."""
        try:
            match = resolve(request.path_info)
        except Resolver404:
            return error_response("not_found", "There is nothing at this path.")
        request.resolver_match = match
        response: HttpResponseBase = await match.func(request, *match.args, **match.kwargs)
        return response


def as_json(response: HttpResponseBase) -> HttpResponseBase:
    """A non-JSON error answer on the endpoint becomes the wire's JSON error."""
    if response.status_code < 400 or response.get("Content-Type", "").startswith(
        "application/json"
    ):
        return response
    code = _CODE_OF_STATUS.get(response.status_code, "server_error")
    replaced = error_response(code, status=response.status_code if code != "server_error" else 500)
    replaced["Cache-Control"] = "no-store"
    return replaced
