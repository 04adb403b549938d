"""Count where the package writes a conversation's lifecycle (docs/layout.md gives the figures).

    .venv/bin/python scripts/lifecycle_counts.py [--root DIR] [--list]

Read from the source, nothing run (migrations left out; ``--root`` reads another checkout's
``poppy_django``, an old commit's say). A *write of the lifecycle's fields* (``status``,
``responder`` and the lease fields ``lease_owner``, ``lease_expires_at``, ``thread_owner``,
``thread_expires_at``) is any of:

- an assignment (or ``setattr``) of one of them on an object; for ``status``, which other
  models have too, only on a conversation (see below);
- an ``update()`` or ``create()`` of the ``Conversation`` table naming one of them;
- a call given a conversation and one of them: as a keyword (``set_state(conversation,
  status=...)``), as a string (``event_log.save(conversation, "lease_owner")``), or in a
  ``save(update_fields=[...])`` of a conversation;
- a call of the store backend's lease statements (``take``, ``take_and_lock``, ``renew``),
  whose SQL writes the lease fields (the backend's own calls of them left out).

A conversation is an expression named so (``conversation``, ``parent_conversation``,
``turn.conversation``), a parameter or variable annotated ``Conversation``, or a variable
assigned from ``Conversation.objects...`` or from a call of a package function annotated to
return a ``Conversation``. ``tests/ops/test_lifecycle_writes.py`` asks the same reading that
no module but the lifecycle's owner writes these fields.

Besides: the modules that change ``status`` or ``responder`` themselves, the callers of
``set_state`` (the field-by-field setter the lifecycle replaced), the direct saves of a
conversation row outside ``store/`` (``.save()`` of one, ``update()`` of the table), and the
field saves through ``event_log.save`` outside ``store/``.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
FIELDS = frozenset(
    {"status", "responder", "lease_owner", "lease_expires_at", "thread_owner", "thread_expires_at"}
)
#: ``status`` is a field of other models too (actions, operations, sign-ins).
SHARED = frozenset({"status"})
STATE = frozenset({"status", "responder"})
LEASE_STATEMENTS = frozenset({"take", "take_and_lock", "renew"})
TABLE_WRITES = frozenset({"update", "create", "update_or_create", "get_or_create", "bulk_update"})
CONVERSATION_TYPE = re.compile(r"\bConversation\b")


@dataclass(frozen=True)
class Write:
    """One place that writes lifecycle fields."""

    module: str
    line: int
    fields: frozenset[str]
    how: str


def returning_conversation(files: list[Path]) -> frozenset[str]:
    """The names of the package's functions annotated to return a conversation."""
    names = set()
    for path in files:
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
                and node.returns is not None
                and CONVERSATION_TYPE.search(ast.unparse(node.returns))
            ):
                names.add(node.name)
    return frozenset(names)


def _callee(call: ast.Call) -> str:
    func = call.func
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else ""


def _root(node: ast.expr) -> ast.expr:
    """The start of a chain like ``Conversation.objects.filter(...).update``."""
    while True:
        if isinstance(node, ast.Attribute):
            node = node.value
        elif isinstance(node, ast.Call):
            node = node.func
        elif isinstance(node, ast.Subscript):
            node = node.value
        else:
            return node


def _strings(nodes: list[ast.expr]) -> set[str]:
    """The strings given as these arguments, or as the items of a list, tuple or set (the
    fields ``save`` is told to write; not a dict's keys, which are a payload's)."""
    found = set()
    for node in nodes:
        items = node.elts if isinstance(node, ast.List | ast.Tuple | ast.Set) else [node]
        for item in items:
            if isinstance(item, ast.Constant) and isinstance(item.value, str):
                found.add(item.value)
    return found


def _named_conversation(name: str) -> bool:
    """``conversation``, ``parent_conversation``...: not the model, not an id."""
    return (
        "conversation" in name.lower()
        and name != "Conversation"
        and not name.endswith(("_id", "_ids"))
    )


class _Scope(ast.NodeVisitor):
    """The writes of one function (or of a module's top level), in source order."""

    def __init__(self, module: str, returning: frozenset[str]) -> None:
        self.module = module
        self.returning = returning
        self.typed: set[str] = set()
        self.writes: list[Write] = []

    # -- what is a conversation --------------------------------------------------------

    def is_conversation(self, node: ast.expr) -> bool:
        if isinstance(node, ast.Name):
            return node.id in self.typed or _named_conversation(node.id)
        if isinstance(node, ast.Attribute):
            return _named_conversation(node.attr) or node.attr == "parent"
        if isinstance(node, ast.Call):
            return _callee(node) in self.returning or self._from_table(node)
        return False

    @staticmethod
    def _from_table(call: ast.Call) -> bool:
        root = _root(call)
        return isinstance(root, ast.Name) and root.id == "Conversation"

    def _note_typed(
        self, target: ast.expr, value: ast.expr | None, annotation: ast.expr | None
    ) -> None:
        """A variable annotated or assigned as a conversation is one in the rest of its scope."""
        if not isinstance(target, ast.Name):
            return
        annotated = annotation is not None and CONVERSATION_TYPE.search(ast.unparse(annotation))
        if annotated or (isinstance(value, ast.Call) and self.is_conversation(value)):
            self.typed.add(target.id)

    # -- the writes ------------------------------------------------------------------------

    def _add(self, node: ast.AST, fields: set[str], how: str) -> None:
        if fields:
            line = getattr(node, "lineno", 0)
            self.writes.append(Write(self.module, line, frozenset(fields), how))

    def _attribute_written(self, target: ast.expr) -> set[str]:
        if isinstance(target, ast.Tuple | ast.List):
            return set().union(*(self._attribute_written(e) for e in target.elts))
        if not isinstance(target, ast.Attribute) or target.attr not in FIELDS:
            return set()
        owner = target.value
        if isinstance(owner, ast.Name) and owner.id == "self":
            return set()
        if target.attr in SHARED and not self.is_conversation(owner):
            return set()
        return {target.attr}

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self._note_typed(target, node.value, None)
            self._add(node, self._attribute_written(target), "assigned")
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._note_typed(node.target, node.value, node.annotation)
        self._add(node, self._attribute_written(node.target), "assigned")
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._add(node, self._attribute_written(node.target), "assigned")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        name = _callee(node)
        keywords = {k.arg for k in node.keywords if k.arg in FIELDS}
        if name == "setattr" and len(node.args) >= 2:
            owner, field = node.args[0], node.args[1]
            named = field.value if isinstance(field, ast.Constant) else None
            if named in FIELDS and (named not in SHARED or self.is_conversation(owner)):
                self._add(node, {str(named)}, "setattr")
        elif name in TABLE_WRITES and isinstance(node.func, ast.Attribute):
            root = _root(node.func)
            on_table = isinstance(root, ast.Name) and root.id == "Conversation"
            if on_table or self.is_conversation(root):
                self._add(node, {str(k) for k in keywords}, f"Conversation {name}()")
        elif name in LEASE_STATEMENTS and isinstance(node.func, ast.Attribute):
            receiver = node.func.value
            own = isinstance(receiver, ast.Name) and receiver.id == "self"
            if not own and "backends" in ast.unparse(receiver):
                self._add(node, {"lease_owner", "thread_owner"}, f"lease statement {name}")
        elif (node.args and self.is_conversation(node.args[0])) or (
            name == "save"
            and isinstance(node.func, ast.Attribute)
            and self.is_conversation(node.func.value)
        ):
            named = _strings(node.args[1:]) | _strings(
                [k.value for k in node.keywords if k.arg == "update_fields"]
            )
            self._add(node, {str(k) for k in keywords} | (named & FIELDS), f"{name}()")
        self.generic_visit(node)

    # -- nested scopes get their own reading -------------------------------------------------

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        inner = _Scope(self.module, self.returning)
        inner.typed = set(self.typed)
        for arg in [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]:
            if arg.annotation is not None and CONVERSATION_TYPE.search(ast.unparse(arg.annotation)):
                inner.typed.add(arg.arg)
        for statement in node.body:
            inner.visit(statement)
        self.writes.extend(inner.writes)

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]


def package_files(package: Path) -> list[Path]:
    return [
        path
        for path in sorted(package.rglob("*.py"))
        if "migrations" not in path.relative_to(package).parts
    ]


def writes(package: Path, files: list[Path] | None = None) -> list[Write]:
    """Every write of the lifecycle's fields in the package (or in ``files`` of it)."""
    everything = package_files(package)
    returning = returning_conversation(everything)
    found: list[Write] = []
    for path in files if files is not None else everything:
        scope = _Scope(str(path.relative_to(package)), returning)
        scope.visit(ast.parse(path.read_text(), filename=str(path)))
        found.extend(scope.writes)
    return found


def writes_in_source(source: str, returning: frozenset[str] = frozenset()) -> list[Write]:
    """The writes a piece of source holds (how the test shows the reading is not blind)."""
    scope = _Scope("<source>", returning)
    scope.visit(ast.parse(source))
    return scope.writes


def _calls(
    package: Path, test: Callable[[str, ast.Call, _Scope], bool]
) -> Iterator[tuple[str, int, str]]:
    """The calls in the package ``test`` picks (given the module, the call and a reading of
    the module): module, line, what is called."""
    returning = returning_conversation(package_files(package))
    for path in package_files(package):
        module = str(path.relative_to(package))
        scope = _Scope(module, returning)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and test(module, node, scope):
                yield module, node.lineno, ast.unparse(node.func)


def _direct_save(module: str, call: ast.Call, scope: _Scope) -> bool:
    if module.startswith("store/") or not isinstance(call.func, ast.Attribute):
        return False
    if call.func.attr == "save":
        return scope.is_conversation(call.func.value) and "event_log" not in ast.unparse(call.func)
    if call.func.attr == "update":
        root = _root(call.func)
        return isinstance(root, ast.Name) and root.id == "Conversation"
    return False


def _store_save(module: str, call: ast.Call, scope: _Scope) -> bool:
    return not module.startswith("store/") and ast.unparse(call.func) == "event_log.save"


def _set_state(module: str, call: ast.Call, scope: _Scope) -> bool:
    return _callee(call) == "set_state"


def direct_saves(package: Path) -> list[tuple[str, int, str]]:
    """The saves of a conversation row (``.save()`` of one, ``update()`` of the table) outside
    ``store/``: module, line, what is called."""
    return list(_calls(package, _direct_save))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=HERE, help="a checkout (default: this one)")
    parser.add_argument("--list", action="store_true", help="name each place")
    options = parser.parse_args()
    package = options.root / "poppy_django"
    found = writes(package)
    by_module: dict[str, list[Write]] = {}
    for write in found:
        by_module.setdefault(write.module, []).append(write)
    state_changers = sorted(m for m, ws in by_module.items() if any(w.fields & STATE for w in ws))

    def places(calls: list[tuple[str, int, str]]) -> list[str]:
        return [f"{module}:{line} {call}" for module, line, call in calls]

    sections = [
        ("modules that change status or responder themselves", state_changers),
        ("calls of set_state", places(list(_calls(package, _set_state)))),
        ("direct saves of a conversation row outside store/", places(direct_saves(package))),
        (
            "field saves through event_log.save outside store/",
            places(list(_calls(package, _store_save))),
        ),
    ]
    for title, items in sections:
        print(f"{title}: {len(items)}")
        if options.list:
            for item in items:
                print(f"    {item}")
    print(
        f"writes of status, responder and the lease fields: {len(found)} "
        f"in {len(by_module)} modules"
    )
    for module, module_writes in sorted(by_module.items()):
        print(f"    {module}: {len(module_writes)}")
        if options.list:
            for write in module_writes:
                print(f"        {write.line} {write.how}: {', '.join(sorted(write.fields))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
