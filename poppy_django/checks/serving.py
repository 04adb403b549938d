"""How the project serves the app: the routes ``poppy.json`` advertises are in the URLconf
(E012), and the ASGI application is wrapped in ``PoppyBodyLimit`` (W009).

Both are mistakes of the project's own files (``urls.py``, ``asgi.py``) that nothing else
notices: a forgotten ``include("poppy_django.urls")`` leaves ``poppy.json`` advertising an
endpoint that answers ``404 not_found``, and an unwrapped ``asgi.py`` serves, only without
the limits the wrapper adds (and uvicorn prints "ASGI 'lifespan' protocol appears
unsupported." at every start).
"""

from __future__ import annotations

import importlib.util
from typing import Any

from django.conf import settings
from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.urls import Resolver404, resolve
from django.utils.module_loading import import_string

from poppy_django.checks.poppy_dict import Messages, check_id, poppy_dict_problem
from poppy_django.conf import endpoint_prefix

#: Where a personal agent reads the discovery document (wellknown_urls).
POPPY_JSON = "/.well-known/poppy.json"
#: The routes, each with the URLconf that serves it and the route name there.
ROUTES = (
    ("the conversation endpoint", "poppy_django.urls", "conversations"),
    ("the discovery document", "poppy_django.wellknown_urls", "poppy-json"),
)
#: How deep an ASGI application's wrappers are searched (``.app`` of each, as ASGI
#: middleware such as OpenTelemetry's and Sentry's keep the application they wrap).
MOST_WRAPPERS = 10

#: The ASGI wrapper W009 looks for (``poppy_django.asgi.PoppyBodyLimit``), given by
#: :func:`poppy_django.checks.register` from the app's ``ready()``: it lives above the checks.
_body_limit: list[type] = []


def routes_missing() -> list[tuple[str, str, str]]:
    """Each route personal agents are sent to that the URLconf does not serve: its name,
    its path and the URLconf to include."""
    missing = []
    for (what, urlconf, name), path in zip(ROUTES, (endpoint_prefix(), POPPY_JSON), strict=True):
        try:
            match = resolve(path)
        except Resolver404:
            match = None
        if match is None or match.url_name != name:
            missing.append((what, path, urlconf))
    return missing


def check_routes(app_configs: Any = None, **kwargs: Any) -> Messages:
    """E012: ``poppy.json`` or the endpoint it advertises is not in the URLconf."""
    if poppy_dict_problem() is not None:
        return []  # E004 says why
    return [
        checks.Error(
            f"{what.capitalize()} is not in the URLconf ({settings.ROOT_URLCONF}): {path} "
            "answers 404, while personal agents are sent there.",
            hint=f'Add path("", include("{urlconf}")) to your urlpatterns.',
            id=check_id("E012"),
        )
        for what, path, urlconf in routes_missing()
    ]


def asgi_application_path() -> str | None:
    """The project's ASGI application: ``ASGI_APPLICATION``, else the ``asgi`` module beside
    the ``wsgi`` one ``WSGI_APPLICATION`` names (as ``startproject`` writes both)."""
    configured = getattr(settings, "ASGI_APPLICATION", None)
    if configured:
        return str(configured)
    wsgi = getattr(settings, "WSGI_APPLICATION", None) or ""
    package, _, name = str(wsgi).rpartition(".wsgi.")
    if not package or importlib.util.find_spec(f"{package}.asgi") is None:
        return None
    return f"{package}.asgi.{name}"


def _wrapped(application: Any, wrapper: type) -> bool:
    for _ in range(MOST_WRAPPERS):
        if isinstance(application, wrapper):
            return True
        application = getattr(application, "app", None)
        if application is None:
            return False
    return False


def check_asgi_wrapper(app_configs: Any = None, **kwargs: Any) -> Messages:
    """W009: the project's ASGI application is not wrapped in ``PoppyBodyLimit``."""
    path = asgi_application_path()
    if path is None or not _body_limit or poppy_dict_problem() is not None:
        return []  # nothing to judge, or E004 says why
    try:
        application = import_string(path)
    except (ImportError, ImproperlyConfigured):
        return []  # the server names that mistake itself
    if _wrapped(application, _body_limit[0]):
        return []
    module = path.rpartition(".")[0]
    return [
        checks.Warning(
            f"The ASGI application {path} is not wrapped in PoppyBodyLimit: bodies are read "
            "whole before any limit applies, each endpoint request starts two threads, the "
            "other channels' requests hold as many database connections as arrive at once, "
            "and uvicorn says \"ASGI 'lifespan' protocol appears unsupported.\"",
            hint=f"In {module.replace('.', '/')}.py: "
            "from poppy_django.asgi import PoppyBodyLimit, then "
            "application = PoppyBodyLimit(get_asgi_application()) (docs: deployment, "
            '"The body limit, before Django reads a body").',
            id=check_id("W009"),
        )
    ]


def use_body_limit(wrapper: type) -> None:
    """The ASGI wrapper :func:`check_asgi_wrapper` looks for."""
    _body_limit[:] = [wrapper]
