"""How the product reaches Spark at run time: the session a run or a DAG task opens (classic ``local[*]``, a
standalone master, or a Spark Connect client), the configuration and jars it carries, the package shipped
to executors, the Python worker daemon, and the Connect client's probes and errors.

What runs in production imports this package; it never imports :mod:`eos_etl.embedded`, which starts the
servers this package connects to."""
