"""Things kept by name, in the order they were added: the one shape of registry
the packages share (spec sections, fault kinds, added checks, workloads).

Why one: each registry used to keep its own dict and its own add, remove and
find, alike but for the names (and one said "is registered already" where the
others said "exists already").  A name added twice is a programming error
(ValueError), never a silent override: a test's example must not replace a
product kind.  Why not a library: ``catalogue`` (spaCy's) keeps functions in
one global namespace and lets a second ``register`` replace the first.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Generic, TypeVar

T = TypeVar("T")


class Named(Generic[T]):
    """``what`` things by name (``what`` names them in errors: "fault 'kill' ...")."""

    def __init__(self, what: str) -> None:
        self.what = what
        self._items: dict[str, T] = {}

    def add(self, name: str, item: T) -> T:
        if name in self._items:
            raise ValueError(f"{self.what} {name!r} exists already")
        self._items[name] = item
        return item

    def remove(self, name: str) -> T:
        """Remove what ``add`` added (a test's, when the test is done)."""
        return self._items.pop(name)

    def find(self, name: str) -> T | None:
        return self._items.get(name)

    def names(self) -> tuple[str, ...]:
        return tuple(self._items)

    def values(self) -> tuple[T, ...]:
        return tuple(self._items.values())

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)
