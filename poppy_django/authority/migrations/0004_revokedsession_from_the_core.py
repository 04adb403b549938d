"""RevokedSession, taken over from the core with its table and rows (state only).

``poppy_django.0012_revokedsession_moved_to_the_authority`` removed it from the core's state;
the table ``poppy_django_revokedsession`` (made by ``poppy_django.0003_revoked_session``)
is the same one, so nothing is copied and nothing is lost.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("poppy_authority", "0003_mediated_sign_in"),
        ("poppy_django", "0012_revokedsession_moved_to_the_authority"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="RevokedSession",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("session_id", models.CharField(max_length=512, unique=True)),
                        ("revoked_at", models.DateTimeField(auto_now_add=True)),
                    ],
                    options={"db_table": "poppy_django_revokedsession"},
                ),
            ],
            database_operations=[],
        ),
    ]
