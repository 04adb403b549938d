"""The one shape of the core's extension registries.

What a part that plugs in (the issuer, the desk, the MCP server, Operations) or an adopter's
own app adds at one seam of the core is kept in a :class:`Registry` of one typed item, by
name, registered from ``AppConfig.ready()``: the Company Agents, the proposers, the local
issuer, the resources, discovery's entries, the recoveries and the reapers
(docs/layout.md lists them with their item types). A later registration under the same name
replaces the earlier one, as ``ready()`` may run again; the core reads the items at each use,
in the order they were first registered, and each item reads its own settings when asked.

>>> recoveries.register("overdue handoffs", lambda stop: handoff.return_overdue())
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Generic, TypeVar

T = TypeVar("T")


class Registry(Generic[T]):
    """The items registered at one seam, by name."""

    def __init__(self, seam: str) -> None:
        #: What the items are, for messages and ``repr``.
        self.seam = seam
        self._items: dict[str, T] = {}

    def register(self, name: str, item: T) -> T:
        """Add ``item`` under ``name`` (a later call under the same name replaces it)."""
        self._items[name] = item
        return item

    def unregister(self, name: str) -> T | None:
        """Remove what is registered under ``name``; what it was, or None."""
        return self._items.pop(name, None)

    def get(self, name: str) -> T | None:
        return self._items.get(name)

    def names(self) -> list[str]:
        return list(self._items)

    def items(self) -> list[tuple[str, T]]:
        return list(self._items.items())

    def __iter__(self) -> Iterator[T]:
        """The items as registered now (a copy: an item may register while it runs)."""
        return iter(list(self._items.values()))

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return f"<Registry of {self.seam}: {', '.join(self._items) or 'none'}>"
