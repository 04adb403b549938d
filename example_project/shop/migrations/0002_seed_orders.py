"""Seed data: acct-1 (A-1 shipped, A-2 processing) and acct-2 (B-1 shipped)."""

from django.db import migrations

SEED = [
    ("A-1", "acct-1", "Trail running shoes", "shipped"),
    ("A-2", "acct-1", "Rain jacket", "processing"),
    ("B-1", "acct-2", "Camping stove", "shipped"),
]


def seed(apps, schema_editor):
    Order = apps.get_model("shop", "Order")
    for order_id, account_id, item, status in SEED:
        Order.objects.update_or_create(
            id=order_id, defaults={"account_id": account_id, "item": item, "status": status}
        )


def unseed(apps, schema_editor):
    apps.get_model("shop", "Order").objects.filter(id__in=[row[0] for row in SEED]).delete()


class Migration(migrations.Migration):
    dependencies = [("shop", "0001_initial")]
    operations = [migrations.RunPython(seed, unseed)]
