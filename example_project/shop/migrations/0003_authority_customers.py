"""Once the demo customers' creation; now a step that does nothing, kept for the history.

The demo accounts (a published password) are made by ``example_project.shop.demo_accounts``
after every ``migrate``, and only while the project says it is a demo: a migration runs
once, whatever the project later becomes.
"""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("shop", "0002_seed_orders"), ("auth", "0012_alter_user_first_name_max_length")]
    operations = [migrations.RunPython(migrations.RunPython.noop, migrations.RunPython.noop)]
