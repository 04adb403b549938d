"""Seed data: acct-1 (A-1 shipped, A-2 processing) and acct-2 (B-1 shipped)."""

from django.db import migrations

from example_project.shop.seed import SEED, seed_orders


def seed(apps, schema_editor):
    seed_orders(apps.get_model("shop", "Order"))


def unseed(apps, schema_editor):
    apps.get_model("shop", "Order").objects.filter(id__in=[row[0] for row in SEED]).delete()


class Migration(migrations.Migration):
    dependencies = [("shop", "0001_initial")]
    operations = [migrations.RunPython(seed, unseed)]
