"""One small generic registry for plug-ins (engines, scenarios).

Targets are lazy `module:attr` strings, imported on first use, so listing what exists costs nothing.
Registering a name twice is an error; an unknown name gets a "did you mean" suggestion. Nothing
outside a registry branches on a plug-in's kind.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Mapping
from typing import Generic, TypeVar

from loadproof.errors import UsageError

T = TypeVar("T")


class Registry(Generic[T]):
    def __init__(self, what: str) -> None:
        self.what = what
        self._targets: Mapping[str, str] = {}
        self._loaded: dict[str, T] = {}  # by target, so a view whose entry changes loads the new one

    @classmethod
    def of(cls, what: str, targets: dict[str, str]) -> Registry[T]:
        """A registry of `targets` (name -> module:attr), registered in their order."""
        registry: Registry[T] = cls(what)
        for name, target in targets.items():
            registry.register(name, target)
        return registry

    @classmethod
    def over(cls, what: str, targets: Mapping[str, str]) -> Registry[T]:
        """A registry reading `targets` at every lookup (a live view, such as `catalog.column`): an entry
        added to the view later is found, one taken out is gone."""
        registry: Registry[T] = cls(what)
        registry._targets = targets
        return registry

    def register(self, name: str, target: str) -> None:
        if name in self._targets:
            raise ValueError(f"{self.what} {name!r} is already registered ({self._targets[name]})")
        if ":" not in target:
            raise ValueError(f"target {target!r} must read 'module:attr'")
        if not isinstance(self._targets, dict):
            raise TypeError(f"the {self.what} registry is a view of its source; add {name!r} there")
        self._targets[name] = target

    def __contains__(self, name: object) -> bool:
        return name in self._targets

    def names(self) -> list[str]:
        return sorted(self._targets)

    def in_order(self) -> list[str]:
        """The names in the order they were registered (the order a listing should show them)."""
        return list(self._targets)

    def get(self, name: str) -> T:
        if name not in self._targets:
            close = difflib.get_close_matches(name, list(self._targets), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f"; known: {', '.join(self.names())}"
            raise UsageError(f"unknown {self.what} {name!r}{hint}")
        target = self._targets[name]
        if target not in self._loaded:
            module_name, _, attr = target.partition(":")
            self._loaded[target] = getattr(importlib.import_module(module_name), attr)
        return self._loaded[target]
