"""The core is a resource server: no module outside ``poppy_django.authority`` imports it.

Read from the import statements themselves (every ``import``/``from`` in every module,
including those inside functions), so a lazy import cannot hide; the core learns about an
issuer in the same project only through :mod:`poppy_django.verifier.local_issuer`.
"""

from __future__ import annotations

import ast
from pathlib import Path

import poppy_django

PACKAGE = Path(poppy_django.__file__).resolve().parent
ISSUER = "poppy_django.authority"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported(path: Path) -> set[str]:
    """Every module name ``path`` imports (relative imports resolved)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def core_modules() -> list[Path]:
    issuer = PACKAGE / "authority"
    return [path for path in sorted(PACKAGE.rglob("*.py")) if issuer not in path.parents]


def test_no_core_module_imports_the_issuer() -> None:
    offenders = {
        _module_name(path): sorted(
            name for name in _imported(path) if name == ISSUER or name.startswith(ISSUER + ".")
        )
        for path in core_modules()
    }
    assert {name: found for name, found in offenders.items() if found} == {}


def test_the_walk_sees_the_issuer_imports_it_must_find() -> None:
    """The checker is not blind: the authority's own modules do import the authority."""
    assert len(core_modules()) > 40
    views = _imported(PACKAGE / "authority" / "views.py")
    assert "poppy_django.authority.keys" in views
    admin = _imported(PACKAGE / "authority" / "admin.py")
    assert "poppy_django.authority.grants" in admin  # imported inside a function
