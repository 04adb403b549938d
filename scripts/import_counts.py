"""Count what the import-linter contract is about: import circles, imports that run up the
layers, and function-level imports (docs/layout.md gives the figures).

    .venv/bin/python scripts/import_counts.py [--root DIR] [--list]

The module graph is import-linter's own (grimp: every ``import`` in every module, those inside
functions and under ``TYPE_CHECKING`` too). A circle is a set of modules each reaching all the
others (a strongly connected component of more than one module). An upward import is a pair
of modules where the importer's layer is below the imported one's, in the layers of the
``layers`` contract in ``pyproject.toml`` (a module counts in the layer of its root folder or
root module; the composition root at the top). ``--root`` measures another checkout (an old
commit) against this checkout's layers.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import grimp

HERE = Path(__file__).resolve().parent.parent
PACKAGE = "poppy_django"


def layer_ranks() -> dict[str, int]:
    """Each root module's layer, 0 the highest, from the contract's ``layers`` list."""
    config = tomllib.loads((HERE / "pyproject.toml").read_text())
    (contract,) = (c for c in config["tool"]["importlinter"]["contracts"] if c["type"] == "layers")
    ranks: dict[str, int] = {}
    for rank, layer in enumerate(contract["layers"]):
        for name in re.split(r"[:|]", layer.strip("()")):
            ranks[name.strip()] = rank
    return ranks


def circles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph.modules):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.find_modules_directly_imported_by(start))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append(
                        (child, iter(sorted(graph.find_modules_directly_imported_by(child))))
                    )
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def upward(graph: grimp.ImportGraph, ranks: dict[str, int]) -> list[tuple[str, str]]:
    """Pairs (importer, imported) whose importer sits in a lower layer than the imported."""

    def rank(module: str) -> int | None:
        parts = module.split(".")
        return ranks.get(parts[1]) if len(parts) > 1 else None

    pairs = []
    for importer in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(importer)):
            low, high = rank(importer), rank(imported)
            if low is not None and high is not None and low > high:
                pairs.append((importer, imported))
    return pairs


def function_level(root: Path) -> int:
    """The issue's count: indented ``import``/``from`` lines of the package (migrations aside)."""
    found = subprocess.run(
        ["grep", "-rnE", r"^\s+(from poppy_django|import poppy_django)", PACKAGE],
        cwd=root,
        capture_output=True,
        text=True,
    ).stdout.splitlines()
    return len([line for line in found if "migrations" not in line])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=HERE, help="the checkout to measure")
    parser.add_argument("--list", action="store_true", help="name the circles and imports")
    args = parser.parse_args()
    sys.path.insert(0, str(args.root.resolve()))
    graph = grimp.build_graph(PACKAGE, cache_dir=None)
    graph.remove_module(f"{PACKAGE}.migrations")  # remove_module leaves the children
    for module in [m for m in graph.modules if ".migrations." in m]:
        graph.remove_module(module)
    found_circles = circles(graph)
    found_upward = upward(graph, layer_ranks())
    print(f"import circles: {len(found_circles)}")
    if args.list:
        for circle in found_circles:
            print("   ", len(circle), " ".join(m.removeprefix(PACKAGE + ".") for m in circle))
    print(f"imports that run up the layers: {len(found_upward)}")
    if args.list:
        for importer, imported in found_upward:
            print(f"    {importer} -> {imported}")
    print(f"function-level imports: {function_level(args.root)}")


if __name__ == "__main__":
    main()
