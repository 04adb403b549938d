"""The public path of the desk's decisions on actions that need approval.

The code lives in :mod:`poppy_django.desk.decisions` (the decisions) and
:mod:`poppy_django.engine.approvals` (the worker that runs an approved action); this module
keeps the path the docs named (docs/layout.md).
"""

from poppy_django.desk.decisions import approve, awaiting, reject, running

__all__ = ["approve", "awaiting", "reject", "running"]
