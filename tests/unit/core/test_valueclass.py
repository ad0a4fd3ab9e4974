"""valueclass.record builds what @dataclass built for the classes every submit imports: the same __init__
(positional and keyword, defaults, a fresh default per instance), repr, ==, hash, frozen fields, and `plain`
gives what dataclasses.asdict gave. Each is checked against a real dataclass of the same fields."""

from __future__ import annotations

import ast
import dataclasses
from typing import Any

import pytest
from support import ROOT

from kubectl_tao.core.valueclass import Factory, Value, plain, record


@record(frozen=True)
class Flavor(Value):
    name: str
    gpus: int = 0


@record(frozen=True)
class Quota(Value):
    queue: str
    flavors: list[Flavor] = Factory(list)
    labels: dict[str, str] = Factory(dict)
    note: str | None = None


@record
class Plan(Value):
    image: str
    gpus: int
    notes: list[str] = Factory(list)


@dataclasses.dataclass(frozen=True)
class FlavorDC:
    name: str
    gpus: int = 0


@dataclasses.dataclass(frozen=True)
class QuotaDC:
    queue: str
    flavors: list[Any] = dataclasses.field(default_factory=list)
    labels: dict[str, str] = dataclasses.field(default_factory=dict)
    note: str | None = None


def test_init_takes_fields_by_position_and_name_with_defaults() -> None:
    assert Quota("q").flavors == [] and Quota("q").note is None
    quota = Quota("q", [Flavor("a", 8)], note="n")
    assert (quota.queue, quota.flavors, quota.labels, quota.note) == ("q", [Flavor("a", 8)], {}, "n")
    assert Quota("q").flavors is not Quota("q").flavors  # a Factory default is made for each instance
    with pytest.raises(TypeError):
        Quota()  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Quota("q", bogus=1)  # type: ignore[call-arg]


def test_repr_eq_hash_as_a_dataclass_has_them() -> None:
    assert repr(Flavor("a", 8)) == repr(FlavorDC("a", 8)).replace("FlavorDC", "Flavor")
    assert Flavor("a", 8) == Flavor("a", 8) != Flavor("a", 4)
    assert Flavor("a") != FlavorDC("a")
    assert hash(Flavor("a", 8)) == hash(Flavor("a", 8))
    with pytest.raises(TypeError):
        hash(Plan("busybox", 1))  # mutable, as a dataclass with eq


def test_frozen_fields_refuse_assignment_and_mutable_ones_take_it() -> None:
    flavor = Flavor("a", 8)
    with pytest.raises(AttributeError, match="frozen Flavor"):
        flavor.gpus = 4  # type: ignore[misc]
    with pytest.raises(AttributeError):
        del flavor.name
    plan = Plan("busybox", 1)
    plan.gpus = 8
    assert plan.gpus == 8 and plan.replaced(gpus=2) == Plan("busybox", 2, [])


def test_plain_is_what_asdict_gives() -> None:
    ours = Quota("q", [Flavor("a", 8), Flavor("b")], {"k": "v"}, "n")
    theirs = QuotaDC("q", [FlavorDC("a", 8), FlavorDC("b")], {"k": "v"}, "n")
    assert plain(ours) == dataclasses.asdict(theirs)
    assert plain(ours)["labels"] is not ours.labels  # copied, as asdict copies


def test_a_record_must_derive_from_value_and_keep_defaults_last() -> None:
    with pytest.raises(TypeError, match=r"derives from valueclass\.Value"):
        record(type("Loose", (), {"__annotations__": {"a": "int"}}))
    with pytest.raises(TypeError, match="without a default follows one with a default"):
        record(type("Order", (Value,), {"__annotations__": {"a": "int", "b": "int"}, "a": 1}))


def test_every_record_class_of_the_package_is_written_one_way() -> None:
    """A subclass of Value decorated with @record: no dataclass, NamedTuple or hand-written `_fields` class."""
    offenders = []
    for path in sorted((ROOT / "lib" / "kubectl_tao").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        where = path.relative_to(ROOT)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == "dataclasses":
                offenders.append(f"{where}:{node.lineno}: imports dataclasses")
            if not isinstance(node, ast.ClassDef):
                continue
            bases = {b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases}
            decorators = {ast.unparse(d).split("(")[0] for d in node.decorator_list}
            if "NamedTuple" in bases or ("Value" in bases and "record" not in decorators):
                offenders.append(f"{where}:{node.lineno}: {node.name}")
    assert offenders == []
