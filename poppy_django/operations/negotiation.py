"""Extension negotiation (§3.3): Operations are used only when both sides list version 1.

The company lists it in ``poppy.json`` (:mod:`poppy_django.api.discovery`, when enabled); the
personal agent in its client metadata (``"extensions": {"operations": {"version": "1"}}``).
The core never imports the authorization server: it reads the client metadata an issuer app
in this project stored (:mod:`poppy_django.verifier.local_issuer`), or asks the
``CLIENT_EXTENSIONS`` hook.
"""

from __future__ import annotations

from typing import Any

from poppy_django.operations.options import options
from poppy_django.verifier import local_issuer

EXTENSION = "operations"
VERSION = "1"


def lists_operations(client_id: str) -> bool:
    """Whether this personal agent's client metadata lists ``operations`` version 1."""
    hook = options().client_extensions
    if hook is not None:
        return EXTENSION in set(hook(client_id))
    local = local_issuer.registered()
    if local is None:
        return False  # no client metadata to read: only the hook can say it is listed
    metadata = local.client_metadata(client_id)
    return _version(metadata) == VERSION


def _version(metadata: Any) -> str | None:
    if not isinstance(metadata, dict):
        return None
    extensions = metadata.get("extensions")
    entry = extensions.get(EXTENSION) if isinstance(extensions, dict) else None
    version = entry.get("version") if isinstance(entry, dict) else None
    return version if isinstance(version, str) else None


def discovery_entry(endpoint: str) -> dict[str, Any]:
    """``poppy.json``'s ``extensions.operations``."""
    return {"version": VERSION, "endpoint": endpoint}
