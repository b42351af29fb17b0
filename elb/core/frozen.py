"""``quick_init``: a cheaper ``__init__`` for the frozen, slotted dataclasses that a replay makes
by the hundred thousand (the scheduler's ``Job`` and ``Host`` values, elb's ``Node`` records, a
tally's entries).

A frozen dataclass's own ``__init__`` sets each field through ``object.__setattr__`` (the class's
``__setattr__`` refuses): one call per field, several times the cost of a plain attribute store.
The ``__init__`` that ``quick_init`` gives the class has the same signature, defaults and default
factories; it makes the new object an instance of a plain class with the same slots (the only
``object.__setattr__`` call), stores the fields as plain attributes, and makes it an instance of
the frozen class again. The object is the value the dataclass's own ``__init__`` makes (the same
fields, equal, hashed alike, frozen); a test holds the two equal for every class decorated.

``maker(cls)`` is the same construction as a plain function of the same signature: calling a
class with keyword arguments goes through a dict of them (``type.__call__`` hands them to
``__init__`` that way), calling a function does not, so a value made by keyword costs about a
third as much through its maker (the replay makes records and jobs by keyword at every change).
``replacer(cls, *names)`` is ``dataclasses.replace`` of those fields through the maker.

A frozen dataclass without slots (one that keeps more in its ``__dict__``, as the joined
``ClusterState`` keeps its joins) gets the same: its fields are stored in the new object's
``__dict__`` as plain items, where its own ``__init__`` sets each through ``object.__setattr__``.

Only the plain case is handled: a frozen dataclass directly under ``object``, every field set by
``__init__`` (no ``init=False``, ``kw_only`` or ``InitVar``) and no ``__post_init__``; anything
else is refused when the class is defined.

``cached`` is ``functools.cached_property`` without its lock, for a frozen value (with a
``__dict__``) that works a field out when first read and keeps it: Python 3.11's takes a lock at
that first read, which costs more than a small join itself, and a pass makes such a value (the
joined ``ClusterState``) anew each time. A value read from several threads at once may work a
field out twice (the same value: it is worked out from the frozen fields alone).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, Generic, ParamSpec, TypeVar, overload

T = TypeVar("T")
S = TypeVar("S")
P = ParamSpec("P")
_MISSING = object()  # a field with a default factory that the caller left out
_MAKERS: dict[type, Callable[..., Any]] = {}  # each decorated class's maker


def maker(cls: Callable[P, T]) -> Callable[P, T]:
    """A function of ``cls``'s signature that makes the value ``cls(...)`` makes, for a class
    ``quick_init`` decorated (see the module's doc)."""
    make: Callable[P, T] | None = _MAKERS.get(cls)  # type: ignore[call-overload]
    if make is None:
        raise TypeError(f"{cls!r} has no maker: quick_init did not decorate it")
    return make


def replacer(cls: type[T], *names: str) -> Callable[..., T]:
    """A function ``(value, *new)`` that makes what ``dataclasses.replace(value, **dict(zip(names,
    new)))`` makes of a value of ``cls``, a class ``quick_init`` decorated: its maker called with
    the fields ``names`` given and each other read off ``value``, without ``replace``'s checks and
    dict of keywords (a pass makes a record of each node it saw up this way)."""
    make = maker(cls)
    fields = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
    if len(set(names)) != len(names) or not set(names) <= set(fields):
        raise TypeError(f"{cls.__name__}: replacer takes distinct names of its fields, not {names!r}")
    given = {name: f"_v{i}" for i, name in enumerate(names)}
    params = ", ".join(["value", *given.values()])
    args = ", ".join(given.get(name, f"value.{name}") for name in fields)
    namespace: dict[str, Any] = {"make": make}
    exec(f"def replace({params}):\n    return make({args})\n", namespace)  # noqa: S102 (the class's own field names)
    replace: Callable[..., T] = namespace["replace"]
    replace.__qualname__ = replace.__name__ = f"replace_{cls.__name__}_{'_'.join(names)}"
    replace.__doc__ = f"A ``{cls.__qualname__}`` with {', '.join(names)} replaced (``replacer``)."
    return replace


def quick_init(cls: type[T]) -> type[T]:
    """Give the frozen dataclass ``cls`` the cheaper ``__init__`` (see the module's doc)."""
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or not params.frozen or cls.__bases__ != (object,):
        raise TypeError(f"{cls.__name__}: quick_init takes a frozen dataclass directly under object")
    if hasattr(cls, "__post_init__"):
        raise TypeError(f"{cls.__name__}: quick_init does not run __post_init__")
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    if len(fields) != len(getattr(cls, "__dataclass_fields__", {})) or any(not f.init or f.kw_only for f in fields):
        raise TypeError(f"{cls.__name__}: quick_init takes fields that __init__ sets, by position or keyword")
    slotted = "__slots__" in cls.__dict__
    namespace: dict[str, Any] = {"_set": object.__setattr__, "_cls": cls, "_MISSING": _MISSING}
    if slotted:
        namespace["_plain"] = type(f"_{cls.__name__}Plain", (), {"__slots__": cls.__dict__["__slots__"]})
    args: list[str] = []
    body: list[str] = []
    for f in fields:
        name = f.name
        target = f"self.{name}" if slotted else f"d[{name!r}]"  # a slot's plain store, or an item of the ``__dict__``
        if f.default is not dataclasses.MISSING:
            namespace[f"_d_{name}"] = f.default
            args.append(f"{name}=_d_{name}")
            body.append(f"    {target} = {name}")
        elif f.default_factory is not dataclasses.MISSING:
            namespace[f"_f_{name}"] = f.default_factory
            args.append(f"{name}=_MISSING")
            body.append(f"    {target} = _f_{name}() if {name} is _MISSING else {name}")
        else:
            args.append(name)
            body.append(f"    {target} = {name}")
    if slotted:  # made an instance of the plain class with the same slots, then of ``cls`` again
        init = ["    _set(self, '__class__', _plain)", *body, "    self.__class__ = _cls"]
        make = ["    self = _new(_plain)", *body, "    self.__class__ = _cls"]
    else:
        init = ["    d = self.__dict__", *body]
        make = ["    self = _new(_cls)", "    d = self.__dict__", *body]
    source = "\n".join(
        [
            f"def __init__(self, {', '.join(args)}):",
            *init,
            f"def make({', '.join(args)}):",
            *make,
            "    return self",
        ]
    )
    namespace["_new"] = object.__new__
    exec(source, namespace)  # noqa: S102 (source made above from the class's own field names)
    make = namespace["make"]
    make.__qualname__ = make.__name__ = f"make_{cls.__name__}"
    make.__annotations__ = {k: v for k, v in cls.__init__.__annotations__.items() if k != "return"}
    make.__doc__ = f"``{cls.__qualname__}(...)``, made without a call of the class (``maker``)."
    _MAKERS[cls] = make
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__annotations__ = dict(cls.__init__.__annotations__)
    init.__doc__ = cls.__init__.__doc__
    cls.__init__ = init  # type: ignore[method-assign]
    return cls


class cached(Generic[S, T]):
    """A field of ``S`` worked out by the function decorated when first read, then kept in the
    instance's ``__dict__`` (see the module's doc): the next reads find it there, as a plain
    attribute, without calling this descriptor."""

    def __init__(self, func: Callable[[S], T]) -> None:
        self.func = func
        self.name = func.__name__
        self.__doc__ = func.__doc__

    def __set_name__(self, owner: type[S], name: str) -> None:
        self.name = name

    @overload
    def __get__(self, instance: None, owner: type[S] | None = None) -> cached[S, T]: ...
    @overload
    def __get__(self, instance: S, owner: type[S] | None = None) -> T: ...
    def __get__(self, instance: S | None, owner: type[S] | None = None) -> T | cached[S, T]:
        if instance is None:
            return self
        value = instance.__dict__[self.name] = self.func(instance)
        return value
