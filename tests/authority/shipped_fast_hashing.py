"""The example project's settings as shipped, but for a fast password hasher first (Django's
testing docs' advice): for the deployments of tests whose rules count sign-in attempts and
do not depend on what a hash costs (``tests/authority/test_hostile_lockouts.py``: a client's
limit is reached by 100 wrong passwords, each hashed once, ~110 s of PBKDF2 in a loaded run).

The shipped hashers follow, so a password they hashed (the demo accounts, migrated with the
project's own settings) still checks; every hash made here is MD5's.
"""

from django.conf import global_settings

from example_project.settings import *  # noqa: F403

PASSWORD_HASHERS = [
    "django.contrib.auth.hashers.MD5PasswordHasher",
    *global_settings.PASSWORD_HASHERS,
]
