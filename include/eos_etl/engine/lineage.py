"""The lineage headers: which input record each output comes from and which run published it.

Every output the engine publishes carries these four headers first, then the transform's own
(:class:`~eos_etl.engine.transaction_loop.LineageWriter` writes them):

* :data:`H_SOURCE_TOPIC`: the input topic;
* :data:`H_SOURCE_PARTITION`: the input partition, as decimal text;
* :data:`H_SOURCE_OFFSET`: the input record's offset, as decimal text;
* :data:`H_RUN_ID`: the run whose transaction published it.

A public contract: the exactly-once checker (:mod:`eos_etl.checker`), the data-quality checks
(:mod:`eos_etl.quality`), the operator's recovery of lost positions
(:mod:`.lineage_positions`) and external tools select and attribute outputs by these names.
"""

from __future__ import annotations

H_SOURCE_TOPIC = "source_topic"
H_SOURCE_PARTITION = "source_partition"
H_SOURCE_OFFSET = "source_offset"
H_RUN_ID = "run_id"
