from __future__ import annotations

from django.apps import AppConfig


class AuthorityConfig(AppConfig):
    name = "poppy_django.authority"
    label = "poppy_authority"
    verbose_name = "Poppy authorization server"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.core import checks

        from poppy_django.authority.checks import check_authority

        checks.register(check_authority)
