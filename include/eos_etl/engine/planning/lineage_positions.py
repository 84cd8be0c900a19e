"""Where each input partition stands, read from the outputs' lineage headers.

The operator's way back when a partition's position is gone (no group offset,
no checkpoint record: a pipeline that published before it kept checkpoints,
or a checkpoint topic that was deleted). Outputs and offsets commit in one
transaction, so every committed output's ``source_offset`` is below the
position and no committed output exists for a record at or past it: one past
the largest ``source_offset`` per input partition is a position from which
nothing is published twice (records between it and the true position produced
no output, and a deterministic transform produces none again). A partition
with no output at all starts at its earliest offset for the same reason.

Only this pipeline's outputs of this topic count: an output names both (the
``pipeline`` and ``source_topic_id`` headers, :mod:`.lineage`), so another
pipeline's outputs on shared topics, or those of an earlier topic of the same
name, are never taken for this one's. An output without those headers (written
before every output named them) counts when its topic's name matches: it may
be this pipeline's, and taking it for one only ever stops a run.

Each output partition is read backwards from its last stable offset in chunks
(read_committed), and only until every input partition has been seen in it:
the outputs of one input partition are in input order within an output
partition, so the first one met from the end is that partition's largest.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from ...kafka.admin import ClusterAdmin
from ...kafka.reader import iter_ranges
from ..lineage import H_PIPELINE, H_SOURCE_OFFSET, H_SOURCE_PARTITION, H_SOURCE_TOPIC, H_SOURCE_TOPIC_ID
from ..position import Lineage

log = logging.getLogger(__name__)

CHUNK_OFFSETS = 20_000


def read_lineage(admin: ClusterAdmin, config, topic_id: str, input_partitions: list[int], *,
                 progress: Callable[[str], None] = log.info) -> dict[int, tuple[Lineage, int | None]]:
    """What the outputs' lineage says of each of ``input_partitions`` (``config``: the
    :class:`~.pipeline.PipelineConfig`): FOUND with the largest source offset, NONE where no output of
    this pipeline names it and no output record was ever deleted (every output it published is still
    there), NONE_TRUNCATED where records were deleted (retention, deleteRecords): those may have been
    its own. Outputs that never held a record need no reading."""
    offsets = {t: admin.offsets(t, admin.partitions(t)) for t in config.output_topics}
    truncated = any(o.earliest > 0 for parts in offsets.values() for o in parts.values())
    found: dict[int, int] = {}
    if any(o.last_stable > o.earliest for parts in offsets.values() for o in parts.values()):
        found = last_published(admin, config.input_topic, input_partitions, config.output_topics,
                               topic_id=topic_id, pipeline=config.group, progress=progress)
    absent = Lineage.NONE_TRUNCATED if truncated else Lineage.NONE
    return {p: (Lineage.FOUND, found[p]) if p in found else (absent, None) for p in input_partitions}


def last_published(admin: ClusterAdmin, input_topic: str, input_partitions: list[int], output_topics: tuple[str, ...],
                   *, topic_id: str, pipeline: str, chunk: int = CHUNK_OFFSETS,
                   progress: Callable[[str], None] = log.info) -> dict[int, int]:
    """The largest ``source_offset`` of a committed output of ``pipeline`` from ``input_topic`` (its id
    ``topic_id``) per input partition (absent: none found)."""
    wanted = set(input_partitions)
    source, source_id, own = input_topic.encode(), topic_id.encode(), pipeline.encode()
    best: dict[int, int] = {}
    for topic in output_topics:
        for part, off in sorted(admin.offsets(topic, admin.partitions(topic)).items()):
            seen: set[int] = set()
            end, read = off.last_stable, 0
            while end > off.earliest and seen != wanted:
                start = max(off.earliest, end - chunk)
                chunk_best: dict[int, int] = {}
                for rec in iter_ranges(admin.connection, topic, {part: (start, end)}):
                    headers = rec.headers
                    if (headers.get(H_SOURCE_TOPIC) != source or headers.get(H_PIPELINE, own) != own
                            or headers.get(H_SOURCE_TOPIC_ID, source_id) != source_id):
                        continue
                    p = int(headers[H_SOURCE_PARTITION])
                    if p in wanted and p not in seen:
                        chunk_best[p] = max(chunk_best.get(p, -1), int(headers[H_SOURCE_OFFSET]))
                for p, offset in chunk_best.items():
                    seen.add(p)
                    best[p] = max(best.get(p, -1), offset)
                read += end - start
                end = start
            progress(f"{topic}[{part}]: read {read} offsets back from {off.last_stable}, "
                     f"found {len(seen)} of {len(wanted)} input partitions")
    return best
