"""The shop's data-quality checks as the quality package makes them from the shop's description of
its outputs (:data:`eos_etl.shop.output_checks.SHOP_OUTPUTS`): the row checks' table and the four
suites, for whatever lists them without validating a window.

A validation takes the same description from the settings it is given
(:meth:`eos_etl.shop.settings.ShopSettings.checked_outputs`); the shop and the quality package do
not import each other, this layer wires them.
"""

from __future__ import annotations

from ..quality.row_checks import row_checks
from ..quality.suites import SuiteSpec
from ..quality.suites import all_suites as suites_of
from ..shop.output_checks import SHOP_OUTPUTS

#: suite -> check -> (the column of the suite's record frame it looks at, the condition that makes a
#: record fail it): :func:`eos_etl.quality.row_checks.row_checks` of the shop's outputs.
ROW_CHECKS = row_checks(SHOP_OUTPUTS)


def all_suites() -> list[SuiteSpec]:
    """The shop's four suites (:func:`eos_etl.quality.suites.all_suites`): invoices, shipments,
    pairing, reconciliation."""
    return suites_of(SHOP_OUTPUTS)
