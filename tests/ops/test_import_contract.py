"""The layers of docs/layout.md hold: ``make lint`` runs the import-linter contracts of
``pyproject.toml``, and they refuse an import up the layers, into a part that plugs in, from
the issuer or the desk into the Operations extension, or round in a circle.

Each case plants one import in a copy of the package and runs ``lint-imports`` on it; the
unchanged copy passes, so a refusal is the planted import's.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


@pytest.fixture
def package(tmp_path: Path) -> Path:
    """A copy of the package and its contracts, importable from ``tmp_path`` first."""
    shutil.copytree(
        REPO / "poppy_django",
        tmp_path / "poppy_django",
        ignore=shutil.ignore_patterns("__pycache__", "static", "templates"),
    )
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def lint(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"],
        cwd=root,
        env={"PATH": str(LINT_IMPORTS.parent), "PYTHONPATH": str(root)},
        capture_output=True,
        text=True,
        timeout=120,
    )


def plant(root: Path, module: str, line: str) -> None:
    path = root / (module.replace(".", "/") + ".py")
    path.write_text(path.read_text() + f"\n{line}  # planted\n")


def test_the_package_keeps_its_contracts(package: Path) -> None:
    found = lint(package)
    assert found.returncode == 0, found.stdout + found.stderr
    assert "Contracts: 3 kept, 0 broken." in found.stdout


@pytest.mark.parametrize(
    ("module", "line", "refusal"),
    [
        # The durable log reaching up into the turn engine.
        (
            "poppy_django.store.event_log",
            "from poppy_django.engine import loop",
            "poppy_django.store.event_log -> poppy_django.engine.loop",
        ),
        # The core importing a part that plugs in, inside a function (no hiding there).
        (
            "poppy_django.engine.dispatch",
            "def _planted() -> None:\n    from poppy_django.operations import options",
            "poppy_django.engine.dispatch -> poppy_django.operations.options",
        ),
        # One part importing another.
        (
            "poppy_django.desk.queue",
            "from poppy_django.authority import keys",
            "poppy_django.desk.queue -> poppy_django.authority.keys",
        ),
        # The issuer reaching into Operations instead of through the core's seam.
        (
            "poppy_django.authority.take_down",
            "from poppy_django.operations import service",
            "poppy_django.authority.take_down -> poppy_django.operations.service",
        ),
        # A circle inside one layer: the leases importing what imports them.
        (
            "poppy_django.engine.leases",
            "from poppy_django.engine import recovery",
            "No cycles are allowed in poppy_django.engine",
        ),
    ],
    ids=["upward", "into-a-part", "part-to-part", "issuer-to-operations", "circle"],
)
def test_a_planted_import_is_refused(package: Path, module: str, line: str, refusal: str) -> None:
    plant(package, module, line)
    found = lint(package)
    assert found.returncode != 0
    assert refusal in found.stdout
