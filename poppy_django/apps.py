from __future__ import annotations

from django.apps import AppConfig


class PoppyDjangoConfig(AppConfig):
    name = "poppy_django"
    verbose_name = "Poppy conversations"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from poppy_django import checks, observe

        checks.register()
        observe.withhold_user_text_in_logs()
