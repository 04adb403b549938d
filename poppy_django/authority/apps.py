from __future__ import annotations

from django.apps import AppConfig


class AuthorityConfig(AppConfig):
    name = "poppy_django.authority"
    label = "poppy_authority"
    verbose_name = "Poppy authorization server"
    default_auto_field = "django.db.models.BigAutoField"
