"""How a failed expectation is told to a human: the facts a message needs besides the expectation's
own result, and the describers that turn both into one line."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class Facts:
    """What the messages need beyond a Great Expectations result."""

    reconciliation: dict = field(default_factory=dict)  # the reconciliation row
    surplus: dict[str, int] = field(default_factory=dict)  # record output -> records beyond the first per source
    examples: dict[tuple[str, str], list[dict]] = field(default_factory=dict)  # (suite, check) -> rows it tells
    offset_mismatches: list[tuple[int, int | None, int]] = field(default_factory=list)  # (p, committed, end)
    exact_offsets: bool = True


Describe = Callable[[dict, Facts], str]


def _n(result: dict) -> int:
    return int(result.get("unexpected_count") or 0)


def _examples(result: dict, limit: int = 3) -> list:
    seen: list = []
    for v in result.get("partial_unexpected_list") or []:
        if v is not None and v not in seen:
            seen.append(v)
        if len(seen) == limit:
            break
    return seen


def _eg(values: list) -> str:
    return f" (e.g. {', '.join(str(v) for v in values)})" if values else ""


def rows(noun: str, what: str, *, examples: bool = True) -> Describe:
    def describe(result: dict, _facts: Facts) -> str:
        return f"{_n(result)} {noun}(s) {what}" + (_eg(_examples(result)) if examples else "")

    return describe


def told_rows(noun: str, what: str, key: tuple[str, str], tell: Callable[[dict], str]) -> Describe:
    """Failing records told one by one (``tell``) from the example rows the facts hold for ``key``."""
    def describe(result: dict, facts: Facts) -> str:
        told = [tell(e) for e in facts.examples.get(key, [])]
        return f"{_n(result)} {noun}(s) {what}" + (f" (e.g. {'; '.join(told)})" if told else "")

    return describe


def pair_equal(a: str, b: str) -> Describe:
    def describe(_r: dict, facts: Facts) -> str:
        row = facts.reconciliation
        va, vb = row.get(a), row.get(b)
        off = abs(va - vb) if isinstance(va, int) and isinstance(vb, int) else "?"
        label_a = "invoices+dead_letters" if a == "invoices_plus_dead_letters" else a
        return f"{label_a}={va} but {b}={vb} (off by {off})"

    return describe


def mismatching_fields(noun: str) -> Describe:
    def describe(result: dict, _facts: Facts) -> str:
        fields = _examples(result)
        return (f"{_n(result)} {noun}(s) not matching the {noun} schema"
                + (f" (mismatching: {'; '.join(str(f) for f in fields)})" if fields else ""))

    return describe


def surplus(noun: str, output: str) -> Describe:
    def describe(result: dict, facts: Facts) -> str:
        return (f"{facts.surplus.get(output, 0)} extra {noun}(s) for an input record that already has one "
                f"({_n(result)} {noun}(s) share a source offset)")

    return describe


def offsets(_r: dict, facts: Facts) -> str:
    rel = "equal" if facts.exact_offsets else "reach"
    parts = ", ".join(f"partition {p}: committed {c}, window end {e}" for p, c, e in facts.offset_mismatches)
    return (f"the group's committed offsets do not {rel} the window ends on "
            f"{len(facts.offset_mismatches)} partition(s) ({parts})")


def count(column: str, what: str) -> Describe:
    return lambda _r, facts: f"{facts.reconciliation.get(column)} {what}"
