"""The lineage headers: which input record each output comes from and which run published it.

Every output the engine publishes carries these six headers first, then the transform's own
(:class:`~eos_etl.engine.publishing.transaction_loop.LineageWriter` writes them):

* :data:`H_SOURCE_TOPIC`: the input topic;
* :data:`H_SOURCE_PARTITION`: the input partition, as decimal text;
* :data:`H_SOURCE_OFFSET`: the input record's offset, as decimal text;
* :data:`H_RUN_ID`: the run whose transaction published it;
* :data:`H_SOURCE_TOPIC_ID`: the input topic's id (a topic deleted and created again under the same
  name has another), so outputs of an earlier topic of the name are never taken for this one's;
* :data:`H_PIPELINE`: the pipeline that published it (its consumer group), so pipelines that share
  output topics never take each other's outputs for their own.

A public contract: the exactly-once checker (:mod:`eos_etl.checker`), the data-quality checks
(:mod:`eos_etl.quality`), the operator's recovery of lost positions
(:mod:`.lineage_positions`) and external tools select and attribute outputs by these names.
"""

from __future__ import annotations

H_SOURCE_TOPIC = "source_topic"
H_SOURCE_PARTITION = "source_partition"
H_SOURCE_OFFSET = "source_offset"
H_RUN_ID = "run_id"
H_SOURCE_TOPIC_ID = "source_topic_id"
H_PIPELINE = "pipeline"
