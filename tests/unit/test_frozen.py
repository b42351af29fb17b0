"""``quick_init`` makes the value the dataclass's own ``__init__`` makes: for every class elb
decorates, and for a class made here, each field is what the dataclass's ``__init__`` sets
(given by position, by keyword, or left to its default or default factory); the value is equal,
hashed alike, of the class, frozen; a default factory is called once per value. Each class's
``maker`` makes the same value as the class, from the same arguments, and each ``replacer``
what ``dataclasses.replace`` makes. Classes it does not handle are refused, and so is a maker
of a class it did not decorate."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import pkgutil
from dataclasses import dataclass, field
from typing import Any

import pytest

import elb.core
import elb.schedulers
import elb.simulate
from elb.core.frozen import cached, maker, quick_init, replacer
from elb.core.model import Node


def _decorated() -> list[type]:
    """Every class of ``elb.core``, ``elb.simulate`` and ``elb.schedulers`` that ``quick_init``
    decorated (it has a maker)."""
    found: dict[str, type] = {}
    infos = [
        *pkgutil.walk_packages(elb.core.__path__, "elb.core."),
        *pkgutil.walk_packages(elb.simulate.__path__, "elb.simulate."),
        *pkgutil.walk_packages(elb.schedulers.__path__, "elb.schedulers."),
    ]
    for info in infos:
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for obj in vars(module).values():
            if inspect.isclass(obj) and obj.__module__ == info.name and _has_maker(obj):
                found[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return [found[k] for k in sorted(found)]


def _has_maker(cls: type) -> bool:
    try:
        maker(cls)
    except TypeError:
        return False
    return True


DECORATED = _decorated()


def _reference(cls: type) -> type:
    """The same fields in a frozen dataclass (slotted or not, as ``cls``) with the dataclass's own
    ``__init__``."""
    spec: list[Any] = []
    for f in dataclasses.fields(cls):
        if f.default_factory is not dataclasses.MISSING:
            spec.append((f.name, Any, field(default_factory=f.default_factory)))
        elif f.default is not dataclasses.MISSING:
            spec.append((f.name, Any, field(default=f.default)))
        else:
            spec.append((f.name, Any))
    slots = "__slots__" in cls.__dict__
    ref: type = dataclasses.make_dataclass(f"{cls.__name__}Ref", spec, frozen=True, slots=slots)
    return ref


def _fields(obj: object) -> dict[str, object]:
    """Every field's value (what the value holds besides: none, when just made)."""
    held = obj.__slots__ if hasattr(obj, "__slots__") else vars(obj)
    return {name: getattr(obj, name) for name in held}


def test_elb_decorates_its_hot_values() -> None:
    names = {c.__name__ for c in DECORATED}
    assert {"Job", "Host", "QueueInstance", "Node", "Instance", "HostFacts", "ManagedNode", "SlurmJob"} <= names


@pytest.mark.parametrize("cls", DECORATED, ids=lambda c: c.__qualname__)
def test_quick_init_sets_what_the_dataclass_init_sets(cls: type) -> None:
    ref = _reference(cls)
    fields = dataclasses.fields(cls)
    required = [f for f in fields if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    given = {f.name: object() for f in fields}  # a distinct object per field
    least = {f.name: given[f.name] for f in required}
    for args, kwargs in (
        ((), least),  # the defaults and default factories
        ((), given),  # every field by keyword
        (tuple(given.values()), {}),  # every field by position
        (tuple(least.values()), {}),
    ):
        expected = ref(*args, **kwargs)
        for make in (cls, maker(cls)):
            made = make(*args, **kwargs)
            assert type(made) is cls
            assert _fields(made) == _fields(expected)
            assert [type(v) for v in _fields(made).values()] == [type(v) for v in _fields(expected).values()]
            assert _fields(made) == _fields(cls(*args, **kwargs))
            if cls.__dataclass_params__.eq:
                assert made == cls(*args, **kwargs)
            with pytest.raises(dataclasses.FrozenInstanceError):
                setattr(made, fields[0].name, 1)
    for f in fields:  # a default factory is called once per value (a new object, if it makes one)
        if f.default_factory is not dataclasses.MISSING:
            for make in (cls, maker(cls)):
                made_twice = getattr(make(**least), f.name) is getattr(make(**least), f.name)
                assert made_twice == (getattr(ref(**least), f.name) is getattr(ref(**least), f.name))
    for make in (cls, maker(cls)):
        with pytest.raises(TypeError):
            make(*given.values(), object())  # one argument too many, as the dataclass's own refuses


@quick_init
@dataclass(frozen=True, slots=True)
class _Sample:
    a: int
    b: str = "b"
    c: dict[str, str] = field(default_factory=dict, hash=False)
    d: tuple[int, ...] = ()


def test_a_sample_value_equals_and_hashes_like_the_dataclass_init_makes() -> None:
    ref = _reference(_Sample)
    made = _Sample(1, c={"k": "v"})
    assert _fields(made) == _fields(ref(1, c={"k": "v"}))
    assert made == _Sample(1, "b", {"k": "v"}, ())
    assert hash(_Sample(2)) == hash(_Sample(2, "b"))
    assert dataclasses.replace(made, a=3) == _Sample(3, c={"k": "v"})
    assert repr(made) == "_Sample(a=1, b='b', c={'k': 'v'}, d=())"
    with pytest.raises(TypeError):
        _Sample()  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        _Sample(1, e=2)  # type: ignore[call-arg]


@quick_init
@dataclass(frozen=True, eq=False)
class _Joined:
    """A frozen value without slots that keeps what it works out (``cached``), as ``ClusterState``."""

    a: int
    b: tuple[int, ...] = ()
    calls: list[int] = field(default_factory=list)

    @cached
    def total(self) -> int:
        self.calls.append(1)
        return self.a + sum(self.b)


def test_a_value_without_slots_gets_its_fields_in_its_dict_and_keeps_what_it_works_out() -> None:
    made = _Joined(1, (2, 3))
    assert vars(made) == {"a": 1, "b": (2, 3), "calls": []}
    assert vars(maker(_Joined)(1, b=(2, 3))) == vars(made)
    assert made.total == 6
    assert made.total == 6
    assert made.calls == [1]  # worked out once, then read from the value's dict
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.a = 2  # type: ignore[misc]
    again = dataclasses.replace(made, a=2)
    assert (again.a, again.b, again.total) == (2, (2, 3), 7)
    assert _Joined.total.name == "total"


def test_classes_it_does_not_handle_are_refused() -> None:
    @dataclass(slots=True)
    class Open:
        a: int

    @dataclass(frozen=True, slots=True)
    class After:
        a: int

        def __post_init__(self) -> None:
            pass

    @dataclass(frozen=True, slots=True)
    class Derived:
        a: int
        b: int = field(init=False, default=0)

    @dataclass(frozen=True, slots=True, kw_only=True)
    class KeywordOnly:
        a: int

    class Plain:
        pass

    for cls in (Open, After, Derived, KeywordOnly, Plain):
        with pytest.raises(TypeError):
            quick_init(cls)
        with pytest.raises(TypeError):
            maker(cls)


@pytest.mark.parametrize("cls", DECORATED, ids=lambda c: c.__qualname__)
def test_replacer_makes_what_dataclasses_replace_makes(cls: type) -> None:
    fields = [f.name for f in dataclasses.fields(cls)]
    value = maker(cls)(*(object() for _ in fields))  # a distinct object per field
    for names in ((fields[0],), tuple(fields[-2:]), tuple(reversed(fields))):
        new = [object() for _ in names]
        made: object = replacer(cls, *names)(value, *new)
        expected = dataclasses.replace(value, **dict(zip(names, new, strict=True)))
        assert type(made) is cls
        assert _fields(made) == _fields(expected)
        assert [type(v) for v in _fields(made).values()] == [type(v) for v in _fields(expected).values()]


def test_replacer_refuses_names_that_are_not_distinct_fields() -> None:
    for names in (("nothing",), ("last_up_at", "last_up_at")):
        with pytest.raises(TypeError):
            replacer(Node, *names)
