"""``path("", include("poppy_django.mcp_urls"))``: the MCP server and its RFC 9728 metadata.

Both answer ``404 not_found`` unless ``POPPY["MCP"]["ENABLED"]``; the path is read when the
URLconf is imported.
"""

from __future__ import annotations

import re

from django.core.exceptions import ImproperlyConfigured
from django.urls import re_path

from poppy_django.mcp import config, metadata, server

app_name = "poppy_mcp"


def _mount_path() -> str:
    """Where the server is mounted; the default while ``POPPY`` cannot be read, so that
    ``manage.py check`` (which imports the URLconf) reports why (E004) instead of crashing."""
    try:
        return config.path()
    except ImproperlyConfigured:
        return "poppy/mcp"


_path = re.escape(_mount_path())

urlpatterns = [
    re_path(rf"^{_path}$", server.mcp_view, name="server"),
    re_path(
        rf"^\.well-known/oauth-protected-resource/{_path}$",
        metadata.protected_resource_metadata,
        name="metadata",
    ),
]
