from __future__ import annotations

from django.apps import AppConfig
from django.db.models.signals import post_migrate


class ShopConfig(AppConfig):
    name = "example_project.shop"
    label = "shop"
    verbose_name = "Acme Outfitters shop"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from example_project.shop import demo_accounts
        from example_project.shop.agent import register_support_agent

        register_support_agent()
        # After every migrate (and a test database's flush): the auth tables exist by then.
        post_migrate.connect(demo_accounts.sync, sender=self, dispatch_uid="shop-demo-accounts")
