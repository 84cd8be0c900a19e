"""What an operation of the model soak is: a drawn :class:`Op`, and the :class:`Registry` of its kinds.

Each kind is registered once, where it is implemented (:meth:`Registry.register` decorates the
``op_<kind>`` method that carries it out), with everything the generator and the executor need
of it: its weight, how its parameters are drawn, what it needs of the lab, whether it starts a
run. A kind cannot be drawn without an implementation, nor implemented without a weight, and
:meth:`Registry.verify` fails the import of a class with an ``op_`` method left unregistered.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass

#: An operation kind is carried out by the method of this prefix and the kind's name.
PREFIX = "op_"
#: What a kind may need of the lab: its own broker (restarted, paused; group offsets that expire a
#: minute after their last commit), or a Spark Connect server.
NEEDS = ("broker", "connect")


@dataclass(frozen=True)
class Op:
    """One operation of a history: its kind and its drawn parameters, as (name, value) pairs."""

    kind: str
    args: tuple = ()

    @property
    def a(self) -> dict:
        return dict(self.args)

    def describe(self) -> str:
        return self.kind + (" " + " ".join(f"{k}={v}" for k, v in self.args) if self.args else "")


@dataclass(frozen=True)
class OperationKind:
    """A registered kind: how often the generator draws it, how, and what carries it out."""

    name: str
    weight: int
    run: Callable[..., None]  # run(history, **args): the implementation, an unbound ``op_`` method
    draw: Callable[[random.Random], dict] | None = None  # its parameters, in order (None: it has none)
    needs: str | None = None  # one of NEEDS, or nothing beyond the shared broker
    starts_run: bool = False  # it starts a run-window process

    @property
    def routed(self) -> bool:
        """With a Connect server, its run's route is drawn: a kind that needs the server runs on it."""
        return self.starts_run and self.needs != "connect"


class Registry:
    """The operation kinds in the order they were registered, which is the order the generator draws
    from: a seed's history depends on it, so a kind moved or added changes every seed's history."""

    def __init__(self) -> None:
        self._kinds: dict[str, OperationKind] = {}

    def register(self, weight: int, *, draw: Callable[[random.Random], dict] | None = None,
                 needs: str | None = None, starts_run: bool = False) -> Callable:
        """Decorate the ``op_<kind>`` method that carries the kind out."""
        if weight < 1:
            raise ValueError(f"an operation's weight is at least 1, not {weight}")
        if needs is not None and needs not in NEEDS:
            raise ValueError(f"an operation needs one of {NEEDS}, not {needs!r}")

        def add(method: Callable[..., None]) -> Callable[..., None]:
            if not method.__name__.startswith(PREFIX):
                raise TypeError(f"{method.__name__}: an operation's method is named {PREFIX}<kind>")
            name = method.__name__.removeprefix(PREFIX)
            if name in self._kinds:
                raise ValueError(f"operation {name!r} registered twice")
            self._kinds[name] = OperationKind(name, weight, method, draw, needs, starts_run)
            return method

        return add

    def verify(self, cls: type) -> None:
        """Every ``op_`` method of ``cls`` is a registered kind's implementation and every kind has its
        method there; raises TypeError otherwise (at the import of the class)."""
        methods = {n.removeprefix(PREFIX) for n in dir(cls) if n.startswith(PREFIX)}
        unregistered = sorted(methods - set(self._kinds))
        unimplemented = sorted(k for k, kind in self._kinds.items() if getattr(cls, PREFIX + k, None) is not kind.run)
        if unregistered or unimplemented:
            raise TypeError(f"{cls.__name__}: operations without weight {unregistered}, "
                            f"kinds without their method {unimplemented}")

    def __getitem__(self, name: str) -> OperationKind:
        return self._kinds[name]

    def __iter__(self) -> Iterator[OperationKind]:
        return iter(self._kinds.values())

    def names(self, keep: Callable[[OperationKind], bool] = lambda _kind: True) -> tuple[str, ...]:
        """The names of the kinds ``keep`` keeps, in registration order."""
        return tuple(k.name for k in self if keep(k))
