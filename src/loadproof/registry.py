"""One small generic registry for plug-ins (engines, scenarios).

Targets are lazy `module:attr` strings, imported on first use, so listing what exists costs nothing.
Registering a name twice is an error; an unknown name gets a "did you mean" suggestion. Nothing
outside a registry branches on a plug-in's kind.
"""

from __future__ import annotations

import difflib
import importlib
from typing import Generic, TypeVar

from loadproof.errors import UsageError

T = TypeVar("T")


class Registry(Generic[T]):
    def __init__(self, what: str) -> None:
        self.what = what
        self._targets: dict[str, str] = {}
        self._loaded: dict[str, T] = {}

    @classmethod
    def of(cls, what: str, targets: dict[str, str]) -> Registry[T]:
        """A registry of `targets` (name -> module:attr), registered in their order."""
        registry: Registry[T] = cls(what)
        for name, target in targets.items():
            registry.register(name, target)
        return registry

    def register(self, name: str, target: str) -> None:
        if name in self._targets:
            raise ValueError(f"{self.what} {name!r} is already registered ({self._targets[name]})")
        if ":" not in target:
            raise ValueError(f"target {target!r} must read 'module:attr'")
        self._targets[name] = target

    def names(self) -> list[str]:
        return sorted(self._targets)

    def in_order(self) -> list[str]:
        """The names in the order they were registered (the order a listing should show them)."""
        return list(self._targets)

    def get(self, name: str) -> T:
        if name in self._loaded:
            return self._loaded[name]
        if name not in self._targets:
            close = difflib.get_close_matches(name, self._targets, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f"; known: {', '.join(self.names())}"
            raise UsageError(f"unknown {self.what} {name!r}{hint}")
        module_name, _, attr = self._targets[name].partition(":")
        obj = getattr(importlib.import_module(module_name), attr)
        self._loaded[name] = obj
        return obj
