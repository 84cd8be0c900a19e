"""The stack's commands: jars, the JVM archive, the broker, Airflow, Spark Connect, the clusters.

fetch-jars | jvm-archive | broker {start,stop,kill,restart,status} | airflow {start,stop,status}
| up | down | status | cluster {up,down,status} | spark-connect {start,stop,restart,status,run}
"""

from __future__ import annotations

from ..embedded.airflow import EmbeddedAirflow
from ..embedded.kafka_cluster import KafkaCluster
from ..embedded.spark_cluster import SparkStandalone
from ..embedded.spark_connect import SparkConnectServer, start_for_windows
from ..jars import maven
from ..jars.versions import KAFKA_BROKER, SPARK_KAFKA
from ..jvm import class_data, spark_patches
from ..shop.jvm_training import SHOP_JVM_WORKLOAD


def register(sub) -> None:
    """Add the stack's commands to the top parser's subparsers."""
    for add in (_add_fetch_jars, _add_jvm_archive, _add_broker, _add_airflow, _add_up_down_status, _add_cluster,
                _add_spark_connect):
        add(sub)


def _add_fetch_jars(sub) -> None:
    p = sub.add_parser("fetch-jars", help="fetch the Kafka broker and Spark connector jars from Maven Central, and "
                                          "build the fixes of Spark's bugs every Spark JVM loads")
    p.add_argument("--force", action="store_true")
    p.set_defaults(func=cmd_fetch_jars)


def cmd_fetch_jars(args) -> int:
    for bundle in (KAFKA_BROKER, SPARK_KAFKA):
        path = maven.fetch(bundle, force=args.force)
        print(f"{bundle.name}: {len(bundle.jars())} jars in {path}")
    # Built from the pinned Spark's sources (fetched too) once per machine (docs/spark-python-task-kill.md).
    print(f"Spark patches: {spark_patches.jar() or 'off ($' + spark_patches.SWITCH_ENV + ')'}")
    return 0


def _add_jvm_archive(sub) -> None:
    p = sub.add_parser("jvm-archive", help="build this machine's class-data archive for Spark's JVMs (make setup "
                       "does; a window's JVM then starts ~1.6 s sooner and uses ~3 CPU s less)")
    p.add_argument("--force", action="store_true", help="rebuild it even if a whole one is there")
    p.set_defaults(func=cmd_jvm_archive)


def cmd_jvm_archive(args) -> int:
    archive = class_data.build(SHOP_JVM_WORKLOAD, force=args.force)
    print(f"Spark JVM class-data archive: {archive} ({archive.stat().st_size / 2**20:.0f} MB)")
    return 0


def _add_broker(sub) -> None:
    p = sub.add_parser("broker", help="the local Kafka broker (var/kafka, port $EOS_ETL_KAFKA_PORT or 9092)")
    p.add_argument("action", choices=["start", "stop", "kill", "restart", "status"])
    p.add_argument("--hard", action="store_true", help="restart with SIGKILL instead of a clean stop")
    p.set_defaults(func=cmd_broker)


def cmd_broker(args) -> int:
    broker = KafkaCluster.local()
    if args.action == "start":
        broker.start()
    elif args.action == "stop":
        broker.stop()
    elif args.action == "kill":
        broker.kill()
    elif args.action == "restart":
        broker.restart(hard=args.hard)
    print(broker.status().describe())
    return 0


def _add_airflow(sub) -> None:
    p = sub.add_parser("airflow", help="the local Airflow, supervised (var/airflow, port "
                                       "$EOS_ETL_AIRFLOW_PORT or 8080)")
    p.add_argument("action", choices=["start", "stop", "status"])
    p.set_defaults(func=cmd_airflow)


def cmd_airflow(args) -> int:
    af = EmbeddedAirflow.local()
    if args.action == "start":
        af.start()
        print(af.describe())
    elif args.action == "stop":
        af.stop()
        print(af.status().describe())
    else:
        print(af.status().describe())
    return 0


def _add_up_down_status(sub) -> None:
    p = sub.add_parser("up", help="start the broker, the Spark Connect server the DAGs' windows run on "
                       "(EOS_ETL_SPARK_CONNECT=off: a spark-submit per window) and Airflow")
    p.add_argument("--no-airflow", action="store_true")
    p.set_defaults(func=cmd_up)
    sub.add_parser("down", help="stop Airflow, the Spark Connect server and the broker").set_defaults(func=cmd_down)
    sub.add_parser("status", help="show what runs where").set_defaults(func=cmd_status)


def cmd_up(args) -> int:
    broker = KafkaCluster.local().start()
    print(broker.status().describe())
    if not args.no_airflow:
        af = EmbeddedAirflow.local(spark_connect=start_for_windows()).start()
        print(af.describe())
    return 0


def cmd_down(_args) -> int:
    EmbeddedAirflow.local().stop()
    SparkConnectServer.local().stop()
    KafkaCluster.local().stop()
    print("stopped Airflow, the Spark Connect server and the Kafka broker")
    return 0


def cmd_status(_args) -> int:
    print(KafkaCluster.local().status().describe())
    print(SparkConnectServer.local().describe())
    print(EmbeddedAirflow.local().status().describe())
    return 0


def _add_cluster(sub) -> None:
    p = sub.add_parser("cluster", help="the local clusters: 3 Kafka nodes (var/kafka-cluster) and a Spark "
                                       "standalone master with 2 workers (var/spark-cluster)")
    p.add_argument("action", choices=["up", "down", "status"])
    p.set_defaults(func=cmd_cluster)


def cmd_cluster(args) -> int:
    kafka, spark = KafkaCluster.local(3), SparkStandalone.local()
    if args.action == "up":
        kafka.start()
        spark.start()
    elif args.action == "down":
        spark.stop()
        kafka.stop()
    print(kafka.status().describe())
    print(spark.status().describe())
    if args.action == "up":
        print(f"run a window on it: python -m eos_etl run-window --master {spark.master_url} "
              f"--bootstrap-servers {kafka.bootstrap_servers}")
    return 0


def _add_spark_connect(sub) -> None:
    p = sub.add_parser("spark-connect", help="a long-lived Spark application that runs windows without a "
                       "spark-submit each (var/spark-connect, loopback port $EOS_ETL_SPARK_CONNECT_PORT or 15002)")
    p.add_argument("action", choices=["start", "stop", "restart", "status", "run"],
                   help="run: the server in the foreground, in place of this process (a container's command)")
    p.set_defaults(func=cmd_spark_connect)


def cmd_spark_connect(args) -> int:
    server = SparkConnectServer.local()
    if args.action == "run":
        server.exec_in_foreground()  # never returns: this process becomes the server
    if args.action in ("stop", "restart"):
        server.stop()
    if args.action in ("start", "restart"):
        server.start()
    print(server.describe())
    if server.is_running() and args.action != "stop":
        # The address only: the token stays in its file (never printed).
        print(f"run windows on it: SPARK_REMOTE={server.url} SPARK_CONNECT_AUTHENTICATE_TOKEN=\"$(cat "
              f"{server.token_file})\" python -m eos_etl run-window ...")
    return 0
