"""String-keyed registries that suggest close matches for unknown names.

Every pluggable piece is registered in one: training-step engines (``sim/engines.py``), collective
algorithms (``collectives/core.py``, one registry per collective), fabric routing policies
(``fabric/routing.py``) and software stacks (``workload/stacks.py``). A piece is registered when its module
is imported, so a missing one is an import error at start-up, never a silent switch to something else; an
unknown name is an :class:`~clustertwin.errors.UnknownNameError` that names the closest registered ones.
Listings keep the order of registration (the order the registering module gives them).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from .errors import InputError, UnknownNameError

T = TypeVar("T")


class Registry(Generic[T]):
    def __init__(self, kind: str):
        self.kind = kind
        self._items: dict[str, T] = {}

    def add(self, name: str, item: T, *, replace: bool = False) -> T:
        if name in self._items and not replace:
            raise InputError(f"{self.kind} {name!r} is defined twice", hint="give each entry a unique id")
        self._items[name] = item
        return item

    def register(self, name: str) -> Callable[[T], T]:
        def deco(item: T) -> T:
            return self.add(name, item)

        return deco

    def remove(self, name: str) -> T:
        """Take ``name`` out again (for tests and plugins that replace a piece)."""
        return self._items.pop(name)

    def get(self, name: str, *, hint: str | None = None) -> T:
        try:
            return self._items[name]
        except KeyError:
            raise UnknownNameError(self.kind, name, self._items, hint=hint) from None

    __getitem__ = get

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._items))

    def __len__(self) -> int:
        return len(self._items)

    def items(self) -> list[tuple[str, T]]:
        return list(self._items.items())

    def names(self) -> list[str]:
        return list(self._items)

    def values(self) -> list[T]:
        return list(self._items.values())
