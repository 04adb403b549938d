"""The discovery documents as served (E301, E302): the draft's rules applied to them."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from django.core import checks
from django.core.exceptions import ImproperlyConfigured

from poppy_django.addresses import configured_origin
from poppy_django.api.discovery import poppy_document
from poppy_django.api.discovery_rules import discovery_problems, metadata_problems
from poppy_django.checks.poppy_dict import poppy_dict_problem
from poppy_django.conf import debug_configured
from poppy_django.verifier import local_issuer


def check_discovery(app_configs: Any = None, **kwargs: Any) -> list[Any]:
    """E301/E302 with ``DEBUG`` off: the documents as served.

    They are built as served at ``POPPY["BASE_URL"]``; without it they depend on each
    request's host, and the check waits for one to be set.
    """
    if debug_configured() or poppy_dict_problem() is not None:
        return []  # development; or E004 says why
    origin = configured_origin()
    if not origin:
        return []
    try:
        document = poppy_document(None)
    except ImproperlyConfigured:
        return []  # E004 (unknown DISCOVERY keys) or the authority's checks say why
    served_by = urlsplit(origin).hostname
    found = [("poppy.json", "301", p) for p in discovery_problems(document, served_by)]
    local = local_issuer.registered()
    metadata = local.oauth_metadata(None) if local is not None else None
    if metadata is not None:
        found += [("OAuth metadata", "302", p) for p in metadata_problems(dict(metadata), document)]
    return [
        checks.Error(
            f"{where} as served at {origin}: {problem}.",
            hint=problem.fix,
            id=f"poppy_django.E{number}",
        )
        for where, number, problem in found
    ]
