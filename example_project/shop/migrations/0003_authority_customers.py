"""The Users of acct-1 and acct-2, who log in on the authority's page to connect an agent.

Demo accounts with a published password ("acme-demo"): the example project's Users, as its
seed orders are its orders. The authority's account id of a User is its username.
"""

from django.contrib.auth.hashers import make_password
from django.db import migrations

CUSTOMERS = ("acct-1", "acct-2")
PASSWORD = "acme-demo"


def create(apps, schema_editor):
    user_model = apps.get_model("auth", "User")
    for username in CUSTOMERS:
        user_model.objects.get_or_create(
            username=username, defaults={"password": make_password(PASSWORD)}
        )


def remove(apps, schema_editor):
    apps.get_model("auth", "User").objects.filter(username__in=CUSTOMERS).delete()


class Migration(migrations.Migration):
    dependencies = [("shop", "0002_seed_orders"), ("auth", "0012_alter_user_first_name_max_length")]
    operations = [migrations.RunPython(create, remove)]
