"""Benchmarks: the exactly-once job side by side with Spark's at-least-once writer,
the raw producer and the one-transaction-per-record loop (``python -m eos_etl_lab bench``)."""
