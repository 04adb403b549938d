"""``path("", include("poppy_django.operations.urls"))``: the operations endpoint.

Mounted at ``POPPY["OPERATIONS"]["PATH"]`` (``poppy/operations``); every route answers
``404 not_found`` unless the extension is enabled, so including it is always safe. With
``PAGE_PATH`` set, the website's operation page (:mod:`poppy_django.operations.page`) too.
"""

from __future__ import annotations

import re

from django.core.exceptions import ImproperlyConfigured
from django.urls import URLPattern, re_path

from poppy_django.operations import page, views
from poppy_django.operations.options import OperationsOptions, options

app_name = "poppy_operations"


def _options_now() -> OperationsOptions:
    """The options; the defaults while ``POPPY`` cannot be read, so that ``manage.py check``
    (which imports the URLconf) reports why (E004) instead of crashing."""
    try:
        return options()
    except ImproperlyConfigured:
        return OperationsOptions()


_base = re.escape(_options_now().path)
_id = r"(?P<operation_id>[^/]+)"

_ROUTES: list[tuple[str, type[views.EndpointView], str]] = [
    (rf"^{_base}/{_id}$", views.OperationView, "operation"),
    (rf"^{_base}/{_id}/confirm$", views.ConfirmView, "confirm"),
    (rf"^{_base}/{_id}/cancel$", views.CancelView, "cancel"),
    (rf"^{_base}(?:/.*)?$", views.NotFoundView, "not_found"),
]
urlpatterns: list[URLPattern] = [
    re_path(route, view.as_view(), name=name)  # type: ignore[arg-type]
    for route, view, name in _ROUTES
]
_page = _options_now().page_path
if _page is not None:
    # The website's page of an operation (PAGE_PATH), for a personal agent's browser.
    urlpatterns.insert(0, re_path(rf"^{re.escape(_page)}/{_id}$", page.operation_page, name="page"))
