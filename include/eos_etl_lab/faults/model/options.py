"""The model soak's options: which seeds, how long their histories, what they may draw, how a failing one is shrunk."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class ModelSoakOptions:
    seeds: tuple[int, ...] = (1, 2, 3, 4, 5)
    length: int = 8  # operations per history
    shrink_budget: int = 8  # re-executions per failing seed
    broker_ops: bool = True
    connect: bool = False  # a Spark Connect server: runs on either route, the server killed under a run
    shrink_repeats: int = 2  # executions of a candidate before it counts as not failing
