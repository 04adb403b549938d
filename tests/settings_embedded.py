"""The embedded default: SQLite, turns on in-process threads, in-process wake-ups."""

import os
import tempfile

os.environ.pop("DATABASE_URL", None)
os.environ.pop("REDIS_URL", None)
os.environ.setdefault("POPPY_VAR_DIR", tempfile.mkdtemp(prefix="poppy-embedded-"))

from tests.settings import *  # noqa: E402, F403

# A file, not SQLite's shared-cache memory database: the turn threads need real locking.
DATABASES["default"]["TEST"] = {  # noqa: F405
    "NAME": os.path.join(os.environ["POPPY_VAR_DIR"], "test-embedded.sqlite3")
}
