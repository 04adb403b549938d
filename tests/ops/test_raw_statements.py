"""Every raw statement of the package runs in the store backend (docs/layout.md): no module
outside ``poppy_django/store`` opens a cursor, so the choice between databases and the quoting
of identifiers have one home.

Read from the source (every ``.cursor(`` call, inside functions too), so a lazy helper cannot
hide one; migrations are Django's own and left out.
"""

from __future__ import annotations

import ast
from pathlib import Path

import poppy_django

PACKAGE = Path(poppy_django.__file__).resolve().parent
STORE = PACKAGE / "store"


def cursors_opened(path: Path) -> list[int]:
    """The lines of ``path`` that open a database cursor."""
    tree = ast.parse(path.read_text(), filename=str(path))
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "cursor"
    ]


def modules(*, in_store: bool) -> list[Path]:
    return [
        path
        for path in sorted(PACKAGE.rglob("*.py"))
        if "migrations" not in path.relative_to(PACKAGE).parts
        and (STORE in path.parents) == in_store
    ]


def test_no_module_outside_the_store_opens_a_cursor() -> None:
    found = {
        str(path.relative_to(PACKAGE)): lines
        for path in modules(in_store=False)
        if (lines := cursors_opened(path))
    }
    assert found == {}


def test_the_walk_sees_the_store_backends_cursors() -> None:
    """The checker is not blind: the store backend does open cursors."""
    assert cursors_opened(STORE / "backends.py")
