"""The shop pipeline's settings: its topics, group and transactional ids, and the engine's
configuration they make.

Built wherever a run is described, a DAG parse among them, so this module loads neither Spark
nor a Kafka client: the methods that need one (the transform, the reject reasons, the checked
outputs, the plan) import it when called.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from dataclasses import dataclass

from ..engine import checkpoint_topic, slots
from ..engine.pipeline import PipelineConfig
from ..engine.window import Window
from ..kafka.connection import KafkaConnection
from .schema import DEFAULT_MAX_PAYLOAD_BYTES, ShopTopics

DEFAULT_GROUP = "shop-invoicing"
DEFAULT_TRANSACTIONAL_ID_PREFIX = "shop-invoicing"


@dataclass(frozen=True)
class ShopSettings:
    connection: KafkaConnection
    topics: ShopTopics = ShopTopics()
    group: str = DEFAULT_GROUP
    transactional_id_prefix: str = DEFAULT_TRANSACTIONAL_ID_PREFIX
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES
    #: Input records per transaction; None leaves the engine's default (:class:`PipelineConfig`).
    chunk_records: int | None = None
    #: Writer slots (engine.slots): as committed (a new pipeline: slots.DEFAULT_WRITER_SLOTS), a count, or None
    #: for one transactional id per input partition.
    writer_slots: int | None | str = slots.AS_COMMITTED
    #: The user's own Great Expectations rules, asset -> [{"type", "kwargs", "severity", "notes"}]
    #: (:func:`eos_etl.quality.window_suites.user_rules`); validated with the window's suites.
    expectations: Mapping | None = None

    def pipeline(self, **overrides) -> PipelineConfig:
        """The engine's configuration: built once per run and handed down (``overrides``: the run's
        own settings, such as its run id)."""
        if self.chunk_records is not None:
            overrides.setdefault("chunk_records", self.chunk_records)
        return PipelineConfig(
            connection=self.connection,
            input_topic=self.topics.purchases,
            group=self.group,
            output_topics=self.topics.outputs,
            transactional_id_prefix=self.transactional_id_prefix,
            writer_slots=self.writer_slots,
            **overrides,
        )

    # -- the settings' outside forms, in one place: command-line options and the Variable's JSON ----------
    def to_args(self) -> list[str]:
        """The command-line options that give these settings (all but the connection's) to a
        ``run-window`` or ``plan-window`` process; :meth:`from_args` reads them back.
        ``--chunk-records`` (a run's option, which ``plan-window`` does not take) only when set."""
        t = self.topics
        chunk = ["--chunk-records", str(self.chunk_records)] if self.chunk_records is not None else []
        writers = ([] if self.writer_slots == slots.AS_COMMITTED
                   else ["--writer-slots", slots.option(self.writer_slots)])
        return ["--input-topic", t.purchases, "--invoices-topic", t.invoices, "--shipments-topic", t.shipments,
                "--dlq-topic", t.dead_letters, "--group", self.group,
                "--transactional-id-prefix", self.transactional_id_prefix,
                "--max-payload-bytes", str(self.max_payload_bytes), *writers, *chunk]

    @classmethod
    def from_args(cls, args, connection: KafkaConnection) -> "ShopSettings":
        """The settings parsed options give (``cli/options.add_shop`` defines them)."""
        return cls(connection=connection,
                   topics=ShopTopics(args.input_topic, args.invoices_topic, args.shipments_topic, args.dlq_topic),
                   group=args.group, transactional_id_prefix=args.transactional_id_prefix,
                   max_payload_bytes=args.max_payload_bytes, chunk_records=getattr(args, "chunk_records", None),
                   writer_slots=getattr(args, "writer_slots", slots.AS_COMMITTED))

    @classmethod
    def from_mapping(cls, data: Mapping, connection: KafkaConnection) -> "ShopSettings":
        """The settings a JSON object gives (the DAGs' Airflow Variable), every key optional:
        ``topics`` (``purchases``, ``invoices``, ``shipments``, ``dead_letters``), ``group``,
        ``transactional_id_prefix``, ``max_payload_bytes``, ``chunk_records``, ``writer_slots`` (a count,
        ``"per-partition"``, or absent/null: as committed), ``expectations`` (the user's own rules, see
        :attr:`expectations`)."""
        chunk = data.get("chunk_records")
        return cls(connection=connection, topics=ShopTopics(**data.get("topics", {})),
                   group=data.get("group", DEFAULT_GROUP),
                   transactional_id_prefix=data.get("transactional_id_prefix", DEFAULT_TRANSACTIONAL_ID_PREFIX),
                   max_payload_bytes=int(data.get("max_payload_bytes", DEFAULT_MAX_PAYLOAD_BYTES)),
                   chunk_records=int(chunk) if chunk is not None else None,
                   writer_slots=slots.parse(data.get("writer_slots")), expectations=data.get("expectations"))

    def replay(self, version: str) -> "ShopSettings":
        """The settings of a replay under output version ``version``: its own output topics
        (``<topic>.<version>``), group and transactional ids; the same input."""
        t = self.topics
        topics = ShopTopics(purchases=t.purchases, invoices=f"{t.invoices}.{version}",
                            shipments=f"{t.shipments}.{version}", dead_letters=f"{t.dead_letters}.{version}")
        return dataclasses.replace(self, topics=topics, group=f"{self.group}-replay-{version}",
                                   transactional_id_prefix=f"{self.transactional_id_prefix}-replay-{version}")

    def specs(self, partitions: int, *, outputs_only: bool = False) -> list:
        """Every topic the pipeline needs (:meth:`ShopTopics.specs`) and its checkpoint topic."""
        return [*self.topics.specs(partitions, outputs_only=outputs_only),
                checkpoint_topic.topic_spec(self.pipeline().checkpoint_topic, partitions)]

    def transform(self):
        """Kafka source rows -> the engine's output rows (:func:`.transform.purchases_to_outputs`)."""
        from .transform import purchases_to_outputs  # pyspark: see the module's docstring

        return functools.partial(purchases_to_outputs, topics=self.topics, max_payload_bytes=self.max_payload_bytes)

    def reject_reasons(self):
        """Kafka source rows -> the same rows with ``_reason`` (null: a valid purchase)."""
        from .transform import with_reject_reason  # pyspark: see the module's docstring

        return functools.partial(with_reject_reason, max_payload_bytes=self.max_payload_bytes)

    def checked_outputs(self):
        """What the data-quality checks judge of the outputs (:data:`.output_checks.SHOP_OUTPUTS`): a
        validation of the pipeline (:func:`eos_etl.quality.validate_window`) takes it from here."""
        from .output_checks import SHOP_OUTPUTS  # pyspark: see the module's docstring

        return SHOP_OUTPUTS

    def plan(self, *, for_run: bool = False, pipeline: PipelineConfig | None = None, admin=None,
             **kwargs) -> Window:
        """The next window. Read-only unless ``for_run``: a run about to publish it takes the
        pipeline's transactional ids over when an incomplete transaction holds the group's offsets
        (its own publishers fence them anyway); a plan only looks and reports them as ``held``."""
        # Kafka clients: see the module's docstring.
        from ..engine.planning.planner import plan_window
        from ..engine.planning.recovery import fence_transactional_ids
        from ..kafka.admin import ClusterAdmin

        pipeline = pipeline or self.pipeline()
        if for_run:
            kwargs.setdefault("recover", fence_transactional_ids)
        return plan_window(admin or ClusterAdmin(self.connection), pipeline, **kwargs)
