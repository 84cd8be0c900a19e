"""A window: the bounded slice of an input topic one run processes.

Per partition a half-open offset range ``[start, end)``. ``end`` is exclusive
and is exactly what the run commits for the group when it is done; it is
taken from the last stable offset, so it may sit past aborted records and
transaction markers. Offsets inside a range are not contiguous on
transactional topics: the range bounds positions, not a record count.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from ..errors import ConfigurationError
from .slots import AS_COMMITTED


@dataclass(frozen=True)
class OffsetRange:
    start: int
    end: int

    def __post_init__(self) -> None:
        if self.start < 0 or self.end < self.start:
            raise ValueError(f"invalid offset range [{self.start}, {self.end})")

    @property
    def span(self) -> int:
        """Offsets covered; an upper bound on records (markers take offsets too)."""
        return self.end - self.start

    @property
    def is_empty(self) -> bool:
        return self.end == self.start


@dataclass(frozen=True)
class Window:
    topic: str
    group: str
    ranges: dict[int, OffsetRange] = field(default_factory=dict)
    # Partitions whose start is not the group's committed offset yet: restored from the checkpoint
    # topic (the group's offsets expired), or never published from. A run commits their starts
    # first (engine.tasks.runner), so every partition it touches has a checkpoint record from then on.
    uncommitted: tuple[int, ...] = ()
    # Partitions whose group offsets a transaction in flight held when the plan was made (only a
    # plan that fences nothing has them): planned from their last completed commit. A run's own
    # fencing decides them; its publishing tasks skip whatever the holder did commit.
    held: tuple[int, ...] = ()
    # The topic's id when the window was planned (empty: not known): a window is never run on a
    # topic of the same name created since.
    topic_id: str = ""
    # When each partition's position was last committed (its checkpoint record's timestamp, ms), where
    # known: a window with nothing new renews only the positions that are getting old (engine.offsets_retention).
    committed_at: dict[int, int] = field(default_factory=dict)
    # The writer slots its plan decided (engine.slots; None: one transactional id per partition), which every
    # task of its run publishes with; AS_COMMITTED: not decided (a window of an older plan, or built by hand).
    writer_slots: int | None | str = AS_COMMITTED
    # The version of the pipeline's identity (engine.identity) the plan read: every publisher of the run holds
    # the record to it after its init_transactions. 0: planned while the pipeline had none recorded.
    identity_version: int = 0
    # How many partitions the input had when the window was planned: what its checkpoint records say, so a
    # partition added before the run still reads as added after the pipeline's last commit. 0: not known.
    input_partitions: int = 0

    @property
    def partitions(self) -> list[int]:
        return sorted(self.ranges)

    @property
    def is_empty(self) -> bool:
        return all(r.is_empty for r in self.ranges.values())

    @property
    def span(self) -> int:
        return sum(r.span for r in self.ranges.values())

    def nonempty(self) -> dict[int, OffsetRange]:
        return {p: r for p, r in sorted(self.ranges.items()) if not r.is_empty}

    def __str__(self) -> str:
        parts = ", ".join(f"{p}:[{r.start},{r.end})" for p, r in sorted(self.ranges.items()))
        return f"{self.topic} group={self.group} {{{parts}}} span={self.span}"

    def check_against(self, topic: str, group: str, last_stable: dict[int, int], topic_id: str = "") -> None:
        """Raise :class:`ConfigurationError` unless this window is over ``topic`` (whose id is now
        ``topic_id``) for ``group`` and every range lies within what the partition holds now
        (``last_stable``: partition -> last stable offset; a partition missing there does not exist)."""
        if self.topic != topic:
            raise ConfigurationError(f"the window is over topic {self.topic!r}, the pipeline reads {topic!r}")
        if self.topic_id and topic_id and self.topic_id != topic_id:
            raise ConfigurationError(f"the window was planned on topic {topic!r} with id {self.topic_id}; the topic "
                                     f"now has id {topic_id} (deleted and created again since): plan a new window")
        if self.group != group:
            raise ConfigurationError(f"the window was planned for group {self.group!r}, the pipeline's is {group!r}")
        for p, r in sorted(self.ranges.items()):
            if p not in last_stable:
                raise ConfigurationError(f"the window names partition {p}, which {topic!r} does not have")
            if r.end > last_stable[p]:
                raise ConfigurationError(f"the window's partition {p} ends at {r.end}, past its last stable "
                                         f"offset {last_stable[p]}: not a window planned on this topic")

    # -- JSON (CLI output, spark-submit argument, XCom) -------------------------
    def to_dict(self) -> dict:
        data = {
            "topic": self.topic,
            "group": self.group,
            "partitions": {str(p): [r.start, r.end] for p, r in sorted(self.ranges.items())},
        }
        if self.uncommitted:
            data["uncommitted"] = list(self.uncommitted)
        if self.held:
            data["held"] = list(self.held)
        if self.topic_id:
            data["topic_id"] = self.topic_id
        if self.committed_at:
            data["committed_at"] = {str(p): ms for p, ms in sorted(self.committed_at.items())}
        if self.writer_slots != AS_COMMITTED:
            data["writer_slots"] = self.writer_slots  # null: one transactional id per partition
        if self.identity_version:
            data["identity_version"] = self.identity_version
        if self.input_partitions:
            data["input_partitions"] = self.input_partitions
        return data

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), separators=(",", ":"))

    @classmethod
    def from_dict(cls, data: dict) -> "Window":
        """Raises ``ValueError`` (or ``KeyError``/``TypeError``) on anything but plan-window's shape."""
        if (not isinstance(data, dict) or not isinstance(data.get("topic"), str)
                or not isinstance(data.get("group"), str)):
            raise ValueError("topic and group must be strings")
        ranges = {}
        for p, se in dict(data["partitions"]).items():
            if not isinstance(se, list) or len(se) != 2 or not all(type(o) is int for o in se):
                raise ValueError(f"partition {p!r}: expected [start, end] offsets")
            ranges[int(p)] = OffsetRange(se[0], se[1])
        uncommitted = data.get("uncommitted", [])
        if not isinstance(uncommitted, list) or not all(type(p) is int and p in ranges for p in uncommitted):
            raise ValueError("uncommitted: expected a list of the window's partitions")
        held = data.get("held", [])
        if not isinstance(held, list) or not all(type(p) is int and p in ranges for p in held):
            raise ValueError("held: expected a list of the window's partitions")
        topic_id = data.get("topic_id", "")
        if not isinstance(topic_id, str):
            raise ValueError("topic_id: expected a string")
        committed_at = dict(data.get("committed_at", {}))
        if not all(type(ms) is int for ms in committed_at.values()):
            raise ValueError("committed_at: expected a timestamp (ms) per partition")
        committed_at = {int(p): ms for p, ms in committed_at.items()}
        if not set(committed_at) <= set(ranges):
            raise ValueError("committed_at: expected the window's partitions")
        writer_slots = data.get("writer_slots", AS_COMMITTED)
        if writer_slots not in (None, AS_COMMITTED) and (type(writer_slots) is not int or writer_slots < 1):
            raise ValueError("writer_slots: expected a positive count or null")
        counts = {name: data.get(name, 0) for name in ("identity_version", "input_partitions")}
        if not all(type(n) is int and n >= 0 for n in counts.values()):
            raise ValueError("identity_version, input_partitions: expected counts")
        return cls(topic=data["topic"], group=data["group"], ranges=ranges, uncommitted=tuple(uncommitted),
                   held=tuple(held), topic_id=topic_id, committed_at=committed_at, writer_slots=writer_slots,
                   **counts)

    @classmethod
    def from_json(cls, text: str) -> "Window":
        return cls.from_dict(json.loads(text))

    # -- Spark's Kafka source options ---------------------------------------------
    def spark_starting_offsets(self, partitions=None) -> str:
        """The nonempty ranges' starts (of ``partitions`` only, when given), as Spark's option wants them."""
        return json.dumps({self.topic: {str(p): r.start for p, r in self.nonempty().items()
                                        if partitions is None or p in partitions}})

    def spark_ending_offsets(self, partitions=None) -> str:
        return json.dumps({self.topic: {str(p): r.end for p, r in self.nonempty().items()
                                        if partitions is None or p in partitions}})
