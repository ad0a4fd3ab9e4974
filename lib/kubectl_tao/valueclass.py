"""A base for small record classes: repr, equality and hash from the field names, as dataclasses and NamedTuple
generate them, without what those cost at import. `kubectl tao status` imports about a dozen such classes:
dataclasses imports inspect and builds each class's methods from source; a NamedTuple, in a module with
`from __future__ import annotations`, compiles every field's annotation. Measured on status: dataclasses 56 M
instructions, the NamedTuples that replaced them about 40 M more than this base (BENCHMARKS.md).

A subclass lists its fields, in order, in `_fields`, sets `__slots__ = _fields` and writes its `__init__`.
Standard library only.
"""

from __future__ import annotations

from typing import Any, ClassVar


class Value:
    """Fields named by `_fields`: shown by repr, compared by ==, hashed when every field is hashable."""

    __slots__ = ()
    _fields: ClassVar[tuple[str, ...]] = ()

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._fields)
        return f"{type(self).__name__}({shown})"

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, name) == getattr(other, name) for name in self._fields)

    def __hash__(self) -> int:
        return hash(tuple(getattr(self, name) for name in self._fields))

    def as_dict(self) -> dict[str, Any]:
        """Every field by name, in `_fields` order (not copied)."""
        return {name: getattr(self, name) for name in self._fields}

    def replaced(self, **changes: Any) -> Any:
        """A copy with `changes` (field=value) applied, as dataclasses.replace would make it."""
        return type(self)(**{**self.as_dict(), **changes})
