"""What a topic should be: its name, partitions and settings (data only; making and checking topics
is :mod:`.topics`)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class TopicSpec:
    name: str
    partitions: int
    config: dict[str, str] = field(default_factory=dict)
