from __future__ import annotations

from django.apps import AppConfig


class PoppyDjangoConfig(AppConfig):
    name = "poppy_django"
    verbose_name = "Poppy conversations"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.core.signals import request_started

        from poppy_django import checks, observe
        from poppy_django.engine import executors

        checks.register()
        observe.withhold_user_text_in_logs()
        request_started.connect(executors.recover_on_request, dispatch_uid="poppy_recovery")
