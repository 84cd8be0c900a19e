"""Command line: ``python -m eos_etl <command>`` (or ``eos-etl``)."""

from .pipeline import main

__all__ = ["main"]
