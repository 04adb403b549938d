"""The order of a key's versions: which of two was set by the later write.

A conversation's version starts with its ``last_seq`` and its ``pruned_before_seq``
(``5.1.n``), and both only grow, so a later write's version ranks at least as high as an
earlier one's, compared by ``last_seq``, then ``pruned_before_seq``. Writes commit in order
but their publishes may land in any order (two processes, two threads), so whatever sets a
version asks this order first. A value without the two numbers (an out-of-date mark, an
empty version) has no rank: no tail holds it.

The rule is written twice, once for each place a version is set, and nowhere else: in Python
(:func:`rank`, for this process's own versions) and in Lua (:data:`LUA`, the text every script
of :mod:`.versions` that compares versions starts with).
"""

from __future__ import annotations

import re

_RANKED = re.compile(r"(\d+)\.(\d+)", re.ASCII)

#: ``rank(version)``: ``{last_seq, pruned_before_seq}``, or nil for a value without them (a
#: missing key's ``false`` included); ``after(a, b)``: whether rank ``a`` is a later write's.
LUA = """
local function rank(version)
  local seq, pruned = string.match(version or '', '^(%d+)%.(%d+)')
  if seq then return {tonumber(seq), tonumber(pruned)} end
  return nil
end
local function after(a, b)
  return a[1] > b[1] or (a[1] == b[1] and a[2] > b[2])
end
"""


def rank(version: str) -> tuple[int, int] | None:
    """``version``'s ``(last_seq, pruned_before_seq)``, or None for a value without them."""
    found = _RANKED.match(version)
    return (int(found[1]), int(found[2])) if found else None


def after(version: str, other: str) -> bool:
    """Whether ``version`` was set by a later write than ``other`` (both ranked)."""
    mine, theirs = rank(version), rank(other)
    return mine is not None and theirs is not None and mine > theirs
