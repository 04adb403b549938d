"""RevokedSession belongs to the issuer (``poppy_django.authority``), not the core.

State only: the table ``poppy_django_revokedsession`` stays where it is, with its rows;
``poppy_authority.0004_revokedsession_from_the_core`` takes it over under the same name.
"""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("poppy_django", "0011_operations"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name="RevokedSession")],
            database_operations=[],
        ),
    ]
