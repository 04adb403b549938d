"""Upgrading a database: RevokedSession moves from the core to the authority, rows kept."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = pytest.mark.django_db(transaction=True)

CORE_BEFORE = ("poppy_django", "0011_operations")
AUTHORITY_BEFORE = ("poppy_authority", "0003_mediated_sign_in")
AUTHORITY_AFTER = ("poppy_authority", "0004_revokedsession_from_the_core")


def test_revocations_made_before_the_move_are_still_revocations_after_it() -> None:
    executor = MigrationExecutor(connection)
    executor.migrate([CORE_BEFORE, AUTHORITY_BEFORE])
    executor.loader.build_graph()
    old = executor.loader.project_state([CORE_BEFORE]).apps.get_model(
        "poppy_django", "RevokedSession"
    )
    old.objects.create(session_id="ses_revoked_before")
    try:
        executor = MigrationExecutor(connection)
        executor.migrate([AUTHORITY_AFTER])
        executor.loader.build_graph()
        state = executor.loader.project_state([AUTHORITY_AFTER]).apps
        moved = state.get_model("poppy_authority", "RevokedSession")
        assert list(moved.objects.values_list("session_id", flat=True)) == ["ses_revoked_before"]
        assert "RevokedSession".lower() not in {
            model._meta.model_name for model in state.get_app_config("poppy_django").get_models()
        }
    finally:
        executor = MigrationExecutor(connection)
        executor.loader.build_graph()
        executor.migrate(executor.loader.graph.leaf_nodes())
