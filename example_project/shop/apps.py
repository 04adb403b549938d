from __future__ import annotations

from django.apps import AppConfig


class ShopConfig(AppConfig):
    name = "example_project.shop"
    label = "shop"
    verbose_name = "Acme Outfitters shop"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from example_project.shop.agent import register_support_agent

        register_support_agent()
