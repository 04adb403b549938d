"""A releasable package: the version in one place, one changelog section per release, and
install instructions that need no version (``make package`` builds and checks the files)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def version_key(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def test_one_changelog_section_per_release() -> None:
    headings = re.findall(r"^## (.+)$", (ROOT / "docs" / "changelog.md").read_text(), re.M)
    assert headings[0] == "Unreleased" and headings.count("Unreleased") == 1, headings
    released = headings[1:]
    assert all(re.fullmatch(r"\d+\.\d+\.\d+", heading) for heading in released), released
    assert len(set(released)) == len(released), released
    assert released == sorted(released, key=version_key, reverse=True), released
    # The version pyproject.toml names is the next release's, or the latest one's.
    assert version_key(VERSION) >= version_key(released[0]), (VERSION, released[0])


def test_the_version_is_written_in_pyproject_only() -> None:
    """No second copy of the version to keep in step: no wheel or requirement naming it, no
    ``__version__`` (history, "renamed in 0.3.0", may name a release)."""
    escaped = re.escape(VERSION)
    copies = re.compile(
        rf"poppy_django-{escaped}|poppy-django(==|@){escaped}|__version__\s*=|"
        rf"^version\s*=\s*[\"']{escaped}",
        re.M,
    )
    found = [
        str(path.relative_to(ROOT))
        for pattern in ("poppy_django/**/*.py", "docs/*.md", "README.md", "tests/tutorial/*.py")
        for path in ROOT.glob(pattern)
        if copies.search(path.read_text())
    ]
    assert found == [], found


def test_install_instructions_work_before_and_after_publishing() -> None:
    """Before: the wheel from dist/ (--find-links); after: the same command without it."""
    for page in ("README.md", "docs/index.md", "docs/tutorial.md", "docs/operations.md"):
        text = (ROOT / page).read_text()
        assert "--find-links dist" in text, page
        assert not re.search(r"pip install (-U )?poppy-django\b", text), page
