"""A base for small record classes: repr, equality and hash from the field names, as dataclasses and NamedTuple
generate them, without what those cost at import. `kubectl tao status` imports about a dozen such classes:
dataclasses imports inspect and builds each class's methods from source; a NamedTuple, in a module with
`from __future__ import annotations`, compiles every field's annotation. Measured on status: dataclasses 56 M
instructions, the NamedTuples that replaced them about 40 M more than this base (BENCHMARKS.md).

Every record class of the package is written one way: a subclass of Value decorated with `@record` (or
`@record(frozen=True)`), its fields as annotated class attributes, as a dataclass's. Standard library only.
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


class Factory:
    """A field's default made anew for each instance (a list, a dict), as dataclasses' default_factory."""

    __slots__ = ("make",)

    def __init__(self, make: Any) -> None:
        self.make = make


def record(cls: Any = None, *, frozen: bool = False) -> Any:
    """The class decorator of every record class, in place of @dataclass: the fields are the
    class's annotations (read as text, never evaluated), a class attribute of the same name is the default
    (a Factory makes one per instance), and the __init__ takes them as dataclasses' does. Only __init__ is
    compiled (one small exec); repr, ==, hash and `replaced` come from Value, `plain` replaces asdict.
    FROZEN: assigning to a field raises AttributeError, as a frozen dataclass's FrozenInstanceError does.

    Why: dataclasses imports inspect and compiles five methods per class; over the twenty classes a submit
    imports that was about 120 M instructions (about 28 ms), a third of its Python before the first kubectl."""

    def wrap(cls: Any) -> Any:
        if not issubclass(cls, Value):
            raise TypeError(f"{cls.__name__}: a @record class derives from valueclass.Value")
        annotations = cls.__dict__.get("__annotations__", {})  # noqa: RUF063 - inspect is what this avoids
        names = tuple(name for name, kind in annotations.items() if not str(kind).startswith("ClassVar"))
        namespace: dict[str, Any] = {"_MISSING": _MISSING}
        params, values = [], []
        for name in names:
            default = cls.__dict__.get(name, _MISSING)
            if isinstance(default, Factory):
                namespace[f"_make_{name}"] = default.make
                params.append(f"{name}=_MISSING")
                value = f"_make_{name}() if {name} is _MISSING else {name}"
                delattr(cls, name)
            elif default is not _MISSING:
                namespace[f"_default_{name}"] = default
                params.append(f"{name}=_default_{name}")
                value = name
            else:
                if params and "=" in params[-1]:
                    raise TypeError(f"{cls.__name__}: field {name!r} without a default follows one with a default")
                params.append(name)
                value = name
            values.append(f"{name!r}: {value}")
        # One statement for every field, frozen or not (a frozen class refuses setattr): compiling the __init__
        # is most of what a class costs, and a line per field made it half as dear again.
        body = f"self.__dict__.update({{{', '.join(values)}}})" if values else "pass"
        source = f"def __init__(self, {', '.join(params)}):\n    {body}\n"
        exec(source, namespace)  # noqa: S102 - the source is built above from the class's own field names
        init = namespace["__init__"]
        init.__qualname__ = f"{cls.__qualname__}.__init__"
        cls.__init__, cls._fields = init, names
        if frozen:
            cls.__setattr__ = cls.__delattr__ = _refuse
        elif "__hash__" not in cls.__dict__:
            cls.__hash__ = None  # mutable: unhashable, as a dataclass with eq
        return cls

    return wrap if cls is None else wrap(cls)


_MISSING = object()


def _refuse(self: Any, name: str, *_: Any) -> None:
    raise AttributeError(f"cannot assign to field {name!r} of a frozen {type(self).__name__}")


def plain(value: Any) -> Any:
    """VALUE with every record in it turned into a dict of its fields, lists, tuples and dicts copied, as
    dataclasses.asdict does."""
    if isinstance(value, Value):
        return {name: plain(getattr(value, name)) for name in value._fields}
    if isinstance(value, list):
        return [plain(item) for item in value]
    if isinstance(value, tuple):
        return type(value)(plain(item) for item in value)
    if isinstance(value, dict):
        return {plain(key): plain(item) for key, item in value.items()}
    return value
