"""The model soak's registry of operation kinds (broker-free): each kind registered once, by its method,
and the generator's order kept (a seed draws the history it always drew)."""

from __future__ import annotations

import pytest

from eos_etl_lab.faults import model as ms
from eos_etl_lab.faults.model.registry import Op, Registry


def test_every_kind_is_carried_out_by_its_registered_method():
    assert [kind.name for kind in ms.OPERATIONS] == list(ms.WEIGHTS)
    for kind in ms.OPERATIONS:
        assert getattr(ms.History, f"op_{kind.name}") is kind.run
    assert [k for k in ms.RUN_OPS if ms.OPERATIONS[k].routed] == [k for k in ms.RUN_OPS if k not in ms.CONNECT_OPS]


def test_an_operation_without_weight_or_a_kind_without_its_method_is_refused():
    registry = Registry()

    class Unweighted:
        @registry.register(1)
        def op_known(self) -> None: ...

        def op_unknown(self) -> None: ...

    with pytest.raises(TypeError, match=r"without weight \['unknown'\]"):
        registry.verify(Unweighted)
    with pytest.raises(TypeError, match=r"without their method \['known'\]"):
        registry.verify(type("Empty", (), {}))
    with pytest.raises(ValueError, match="registered twice"):
        registry.register(2)(Unweighted.op_known)
    with pytest.raises(ValueError, match="at least 1"):
        registry.register(0)


def test_a_seed_draws_the_history_it_always_drew():
    """The shrinker and a replay (--seed-list) draw a seed's history again: registering a kind in
    another place of the order would change it."""
    partitions, ops = ms.draw_history(1, 8)
    assert partitions == 2
    assert [op.kind for op in ops] == ["produce", "offsets_restore", "idle_tick", "hand_offset_reset", "produce",
                                       "age_out", "run", "partitions_added_between_plan_and_run"]
    assert ops[3] == Op("hand_offset_reset", (("to", "current"), ("seed", 511554)))
    _, ops = ms.draw_history(2, 10, broker_ops=False, connect=True)
    assert ops[4] == Op("signal", (("sig", "TERM"), ("at", "publishing"), ("delay", 1.63), ("route", "connect")))
    assert ops[6] == Op("paused_run", (("line", 12), ("settings", "other_grouping"), ("slots", "3"),
                                       ("route", "connect")))
