"""Which internal-topic partition, and so which node, coordinates a transactional.id or a group: the
mapping the fault tests use to pick the node to fault, checked against values the JVM computes
(``String.hashCode``, then ``Utils.abs(hash) % partitions``)."""

import pytest

from eos_etl_lab.faults.leaders import coordinator_partition, java_string_hash

# (text, String.hashCode(), partition of 50, partition of 3), as printed by Java 17.
JVM = [
    ("hello", 99162322, 22, 1),
    ("polygenelubricants", -2147483648, 0, 0),  # Integer.MIN_VALUE: Utils.abs maps it to 0
    ("\u00e9", 233, 33, 2),
    ("\U0001F600", 1772899, 49, 1),  # outside the BMP: two UTF-16 code units
    ("txn-shop-purchases-0", -1612819103, 3, 2),
    ("shop-group", 2060604648, 48, 0),
]


@pytest.mark.parametrize(("text", "hash_code", "of_50", "of_3"), JVM)
def test_coordinator_partition_matches_the_jvm(text, hash_code, of_50, of_3):
    assert java_string_hash(text) == hash_code
    assert (coordinator_partition(text, 50), coordinator_partition(text, 3)) == (of_50, of_3)
