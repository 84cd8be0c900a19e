"""Fast subset of the fault-injection suite: SIGKILL the whole job at each step boundary.

Each trial stops a real run at a transaction step (after init, mid-produce,
after send_offsets, just before commit, after commit, after the last commit
but before the job reports), kills every process of the job, restarts it and
asks the independent checker. The soak command runs more seeds and scenarios.
"""

from __future__ import annotations

import pytest

from eos_etl.faults import STEP_POINTS, kill_at_step
from eos_etl.shop.generator import generate

pytestmark = [pytest.mark.spark, pytest.mark.slow]


@pytest.mark.parametrize("point", STEP_POINTS)
def test_kill_at_step_boundary_then_recover_exactly_once(shop_factory, point):
    shop = shop_factory(partitions=2)
    generate(shop.connection, shop.topics.purchases, 600, invalid_share=0.1, seed=17,
             transaction_size=100, abort_share=0.2)
    result = kill_at_step(shop, point, seed=1)
    assert result.killed, f"the job never reached {point}"
    assert result.violations == {}, result
    assert result.lso_settled, "an output partition's last stable offset stays below its high watermark"
