"""How the support desk plugs into the core: its system check.

:meth:`poppy_django.apps.PoppyDjangoConfig.ready` calls :func:`register`; the core imports
nothing of the desk (the import-linter contract in ``pyproject.toml``).
"""

from __future__ import annotations

from django.core import checks

from poppy_django.desk.checks import check_channel_manager, check_static_files


def register() -> None:
    checks.register(check_channel_manager, checks.Tags.security)
    # Untagged: collectstatic runs the staticfiles-tagged checks first, when W202 is moot.
    checks.register(check_static_files)
