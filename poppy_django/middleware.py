"""``PoppyJsonErrorsMiddleware``: JSON error bodies on the endpoint, even for Django's own.

The endpoint's views answer every failure as JSON, but a request can be refused before it
reaches them (a Host not in ``ALLOWED_HOSTS`` in ``CommonMiddleware``, an exception in
another middleware). Personal agents expect JSON with ``error`` for every failure, never an
HTML page, so this middleware — placed first in ``MIDDLEWARE`` — rewrites non-JSON error
responses on the endpoint's paths. Other paths are untouched.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.http import HttpRequest
from django.http.response import HttpResponseBase

from poppy_django.conf import poppy_settings
from poppy_django.errors import error_response

_CODE_OF_STATUS = {
    400: "invalid_request",
    404: "not_found",
    405: "method_not_allowed",
    413: "request_too_large",
}

Handler = Callable[[HttpRequest], HttpResponseBase | Awaitable[HttpResponseBase]]


class PoppyJsonErrorsMiddleware:
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
        response = self.get_response(request)
        assert isinstance(response, HttpResponseBase)
        return self._json(request, response)

    async def _acall(self, request: HttpRequest) -> HttpResponseBase:
        response = await self.get_response(request)  # type: ignore[misc]
        return self._json(request, response)

    @staticmethod
    def _json(request: HttpRequest, response: HttpResponseBase) -> HttpResponseBase:
        endpoint = "/" + str(poppy_settings.PATH).strip("/")
        on_endpoint = request.path == endpoint or request.path.startswith(endpoint + "/")
        if not on_endpoint or response.status_code < 400:
            return response
        if response.get("Content-Type", "").startswith("application/json"):
            return response
        code = _CODE_OF_STATUS.get(response.status_code, "server_error")
        status = response.status_code if code != "server_error" else 500
        replaced = error_response(code, status=status)
        replaced["Cache-Control"] = "no-store"
        return replaced
