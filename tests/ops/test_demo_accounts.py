"""The example's demo accounts (a published password) exist only while the project says it
is a demo: the example project as shipped, its settings read from the environment."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.multiprocess.cluster import ROOT

#: Migrates, optionally gives acct-2 a password of its own, and prints which logins work.
_MIGRATE_AND_TRY = """
from django.contrib.auth import authenticate, get_user_model
from django.core.management import call_command
call_command("migrate", verbosity=0)
if {own!r}:
    user = get_user_model().objects.get(username="acct-2")
    user.set_password("acct-2-own-words")
    user.save()
tries = [("acct-1", "acme-demo"), ("acct-2", "acme-demo"), ("acct-2", "acct-2-own-words")]
print("LOGINS", [authenticate(username=u, password=p) is not None for u, p in tries])
"""


def _migrate_and_try(tmp: Path, *, own_password: bool = False, **switches: str) -> list[bool]:
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("DATABASE_URL", "REDIS_URL", "DJANGO_DEBUG", "ACME_DEMO_ACCOUNTS")
    }
    env.update(DJANGO_SETTINGS_MODULE="example_project.settings", POPPY_VAR_DIR=str(tmp))
    env.update(switches)
    result = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", _MIGRATE_AND_TRY.format(own=own_password)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    line = next(line for line in result.stdout.splitlines() if line.startswith("LOGINS"))
    return [word.strip(" []") == "True" for word in line.removeprefix("LOGINS ").split(",")]


def test_the_published_password_opens_nothing_unless_the_project_is_a_demo(
    tmp_path: Path,
) -> None:
    # Production mode as shipped (DEBUG off): no demo account.
    assert _migrate_and_try(tmp_path, DJANGO_DEBUG="0") == [False, False, False]
    # The project says it is a demo: both accounts open with the published password.
    demo = _migrate_and_try(tmp_path, DJANGO_DEBUG="0", ACME_DEMO_ACCOUNTS="1", own_password=True)
    assert demo == [True, False, True]  # acct-2's own password, set after the migrate
    # No longer a demo: the next migrate closes acct-1; acct-2 keeps the password it was given.
    assert _migrate_and_try(tmp_path, DJANGO_DEBUG="0") == [False, False, True]
    # A demo again (DEBUG on, the embedded default): acct-1 is opened again.
    assert _migrate_and_try(tmp_path, DJANGO_DEBUG="1") == [True, False, True]
