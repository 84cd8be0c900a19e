"""The generic exactly-once engine: one window of an input topic, read ``read_committed`` by Spark, mapped by
a transform, published with its positions in one Kafka transaction per writer slot.

Here, what every wing shares: a pipeline (:mod:`.pipeline`), a window (:mod:`.window`), writer slots
(:mod:`.slots`), where a partition stands (:mod:`.position`) and its store (:mod:`.checkpoint_log`,
:mod:`.checkpoint_topic`), the lineage headers, the transform's contract, the offsets retention, the
failpoints and the engine's errors. The wings, each standing only on those below it:

* :mod:`.publishing`: a writer slot's transactions (the producer, the transaction loop, the checkpoint);
* :mod:`.planning`: what a run may do before it reads (the plan, the preflight checks, the recovery);
* :mod:`.tasks`: the run on Spark (the driver's steps, the Kafka read, the publishing tasks and their
  attempts, the in-run guards).
"""
