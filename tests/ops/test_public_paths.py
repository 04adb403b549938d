"""Public import paths are decided once: code lives at its layer's path, and the package root
holds one listed set of re-exports (``FACADES``, docs/layout.md), the stable names to import or
to put in settings. The verifier's old package, ``poppy_django.auth``, is gone; a setting that
still names it is E001, its hint naming the new path."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest
from django.core import checks

import poppy_django
from poppy_django.checks import check_settings

ROOT = Path(poppy_django.__file__).resolve().parent

#: The root's re-exports and the layer module each names.
FACADES = {
    "poppy_django.middleware": "poppy_django.api.middleware",
    "poppy_django.executors": "poppy_django.engine.executors",
    "poppy_django.rest_framework": "poppy_django.api.rest_framework",
    "poppy_django.permissions": "poppy_django.api.permissions",
    "poppy_django.throttling": "poppy_django.api.throttling",
    "poppy_django.views": "poppy_django.api.views",
    "poppy_django.endpoint": "poppy_django.api.endpoint",
    "poppy_django.schema": "poppy_django.api.schema",
    "poppy_django.discovery": "poppy_django.api.discovery",
    "poppy_django.approvals": "poppy_django.desk.decisions",
}


def only_re_exports(path: Path) -> bool:
    """Whether a module holds nothing but its docstring, imports and ``__all__``."""
    body = ast.parse(path.read_text()).body
    for node in body:
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # the docstring
        if isinstance(node, ast.Import | ast.ImportFrom):
            continue
        if isinstance(node, ast.Assign) and [
            t.id for t in node.targets if isinstance(t, ast.Name)
        ] == ["__all__"]:
            continue
        return False
    return bool(body)


@pytest.mark.parametrize("public", sorted(FACADES))
def test_the_root_re_exports_the_same_objects(public: str) -> None:
    facade, layer = importlib.import_module(public), importlib.import_module(FACADES[public])
    assert facade.__all__
    for name in facade.__all__:
        assert getattr(facade, name) is getattr(layer, name), name


def test_the_listed_re_exports_are_the_roots_only_ones() -> None:
    """Each listed module only re-exports, and no unlisted root module only re-exports."""
    re_exporting = {
        f"poppy_django.{path.stem}"
        for path in ROOT.glob("*.py")
        if path.stem != "__init__" and only_re_exports(path)
    }
    assert re_exporting == set(FACADES)


def test_each_re_export_is_a_path_the_docs_give() -> None:
    """A re-export no page tells adopters to import or name is dead code: fold it away (each
    of these was a documented path of 0.2.0, and is still one)."""
    history = {"changelog.md", "benchmarks-history.md"}  # what was, not what to import
    pages = (ROOT.parent / "docs").glob("*.md")
    docs = "\n".join(page.read_text() for page in pages if page.name not in history)
    for public in FACADES:
        named = re.findall(rf"{re.escape(public)}\.\w|from {re.escape(public)} import", docs)
        assert named, f"{public} is named nowhere in docs/ as a path to import"


def test_the_verifiers_old_package_is_gone() -> None:
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("poppy_django.auth")


def test_a_setting_naming_the_old_package_is_e001_with_the_new_path(settings) -> None:
    settings.POPPY = {**settings.POPPY, "AUTHENTICATE": "poppy_django.auth.dpop.verify"}
    found = [m for m in check_settings() if isinstance(m, checks.CheckMessage)]
    (e001,) = [m for m in found if m.id == "poppy_django.E001"]
    assert "poppy_django.auth" in e001.msg
    assert e001.hint is not None and "'poppy_django.verifier.dpop.verify'" in e001.hint
