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

Each output partition is read backwards from its last stable offset in chunks
(read_committed), and only until every input partition has been seen in it:
the outputs of one input partition are in input order within an output
partition, so the first one met from the end is that partition's largest.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from ..kafka.admin import ClusterAdmin
from ..kafka.reader import iter_ranges
from .lineage import H_SOURCE_OFFSET, H_SOURCE_PARTITION, H_SOURCE_TOPIC

log = logging.getLogger(__name__)

CHUNK_OFFSETS = 20_000


def last_published(admin: ClusterAdmin, input_topic: str, input_partitions: list[int], output_topics: tuple[str, ...],
                   *, chunk: int = CHUNK_OFFSETS, progress: Callable[[str], None] = log.info) -> dict[int, int]:
    """The largest ``source_offset`` of a committed output per input partition (absent: none found)."""
    wanted = set(input_partitions)
    source = input_topic.encode()
    best: dict[int, int] = {}
    for topic in output_topics:
        for part, off in sorted(admin.offsets(topic, admin.partitions(topic)).items()):
            seen: set[int] = set()
            end, read = off.last_stable, 0
            while end > off.earliest and seen != wanted:
                start = max(off.earliest, end - chunk)
                chunk_best: dict[int, int] = {}
                for rec in iter_ranges(admin.connection, topic, {part: (start, end)}):
                    if rec.headers.get(H_SOURCE_TOPIC) != source:
                        continue
                    p = int(rec.headers[H_SOURCE_PARTITION])
                    if p in wanted and p not in seen:
                        chunk_best[p] = max(chunk_best.get(p, -1), int(rec.headers[H_SOURCE_OFFSET]))
                for p, offset in chunk_best.items():
                    seen.add(p)
                    best[p] = max(best.get(p, -1), offset)
                read += end - start
                end = start
            progress(f"{topic}[{part}]: read {read} offsets back from {off.last_stable}, "
                     f"found {len(seen)} of {len(wanted)} input partitions")
    return best
