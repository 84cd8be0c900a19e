"""A fingerprint of a multiset of records: the sum of a salted 64-bit hash of each record's key columns.

Two multisets with the same count and the same sum are the same multiset, except with the chance of a
64-bit collision; so equal outputs and inputs are decided by two aggregates, no join and no shuffle of the
records (the lineage expectations, :mod:`.expectations.lineage`).
"""

from __future__ import annotations

from pyspark.sql import functions as F

#: Mixed into every hash, so that the fingerprints are their own hash family.
FINGERPRINT_SALT = "eos-etl-quality"
#: Stands for a missing field in a hash of fields (no field holds it).
NULL_FIELD = "\u0000"
_SUM = "decimal(38,0)"  # 10^6 hashes below 2^63 each: far inside 38 digits


def fingerprint(*columns):
    """One record's contribution to a fingerprint: a 64-bit hash of ``columns``, as a decimal to sum."""
    return F.xxhash64(F.lit(FINGERPRINT_SALT), *columns).cast(_SUM)
