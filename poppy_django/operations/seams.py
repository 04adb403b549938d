"""How the Operations extension plugs into the core.

:meth:`poppy_django.apps.PoppyDjangoConfig.ready` calls :func:`register`: the agent runtime
asks it whether a consequential call is proposed instead, and what a proposal adds to the
wire (:class:`~poppy_django.operations.turns.OperationProposals`), discovery lists it, and
the recovery sweep and ``poppy_reap`` take up its confirmed operations. Each seam reads
``POPPY["OPERATIONS"]`` when it is asked, so the extension is off wherever the setting says
so.
"""

from __future__ import annotations

import threading
from typing import Any

from django.http import HttpRequest

from poppy_django.agent import proposals
from poppy_django.api import discovery
from poppy_django.engine import maintenance, recovery
from poppy_django.operations import negotiation, options, perform
from poppy_django.operations.turns import OperationProposals


def register() -> None:
    proposals.proposers.register("operations", OperationProposals())
    discovery.extensions.register(negotiation.EXTENSION, _discovery_entry)
    recovery.recoveries.register("operations", _recover)
    maintenance.reapers.register("operations", _reap)


def _discovery_entry(request: HttpRequest | None) -> dict[str, Any] | None:
    """``poppy.json``'s ``extensions.operations`` while the extension is on."""
    opts = options.options()
    if not opts.enabled:
        return None
    return negotiation.discovery_entry(f"{discovery.document_origin(request)}/{opts.path}")


def _recover(stop: threading.Event | None) -> None:
    """Confirmed operations whose worker died are performed again (at most once in all)."""
    if options.enabled():
        perform.recover(stop)


def _reap() -> None:
    """Re-dispatch confirmed operations no worker holds."""
    if options.enabled():
        for operation_id in perform.orphaned():
            perform.dispatch_now(operation_id)
