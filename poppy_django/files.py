"""Files a process makes once and every other process then reads (development keys, secrets).

Processes starting at the same moment must agree on one content: it is written aside and
linked into place, and ``os.link`` fails for all but the first, who then read the winner's.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path


def made_once(path: Path, make: Callable[[], bytes]) -> bytes:
    """The content of ``path``, made by ``make`` the first time it is asked for."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}-")
        try:
            os.write(fd, make())
            os.close(fd)
            os.link(tmp, path)  # fails if another process linked its file first: theirs wins
        except FileExistsError:
            pass
        finally:
            os.unlink(tmp)
    return path.read_bytes()
