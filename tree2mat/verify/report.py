"""The report of a check: per output and device, rows compared, mismatches, label rows at a
tie, the largest errors and the first rows that differ (:class:`Report`, JSON schema
:data:`REPORT_SCHEMA`)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

REPORT_SCHEMA = 3
#: The most row numbers of label rows at a tie a report lists (per output, device and walk).
TIE_ROWS = 1000


@dataclass(frozen=True)
class Mismatch:
    row: int
    input: list[float]
    expected: Any
    got: Any


@dataclass(frozen=True)
class Tie(Mismatch):
    """A label row at a tie: the library's scores of its label and of the graph's lie ``gap``
    apart, within the report's ``tie_bound``."""

    gap: float


@dataclass(frozen=True)
class OutputReport:
    """One output (or ``routing``) on one device."""

    name: str
    device: str
    compared: int
    mismatches: int
    max_abs_error: float
    #: The largest relative error over the values away from zero, where the relative tolerance
    #: is the larger part of the tolerance (``rtol x |expected| >= atol``); None where there is
    #: no such value (near zero a relative error says nothing: the tolerance there is atol's).
    max_rel_error: float | None
    first_mismatches: list[Mismatch] = field(default_factory=list)
    problem: str = ""  # structural problem (missing output, wrong shape), if any
    #: Which of the graph's walks ran (traverse: ``>N rows`` or ``<=N rows``, see :func:`tree2mat.verify.walks`),
    #: or empty: a graph with one.
    walk: str = ""
    #: Of the mismatched rows, those within float rounding of an oblique node's hyperplane on
    #: their path (:func:`tree2mat.ir.evaluate.near_hyperplanes`): a sum of w . x in another
    #: order, or with fused multiply-adds, routes them otherwise. Still mismatches: counted apart.
    near_boundary: int = 0
    #: Label rows where the graph's label differs from the library's at a tie: the library's
    #: scores of the two labels lie within the report's ``tie_bound`` (the rounding of the sums,
    #: docs/exactness.md). Not counted in ``mismatches``; they fail only a strict report.
    ties: int = 0
    first_ties: list[Tie] = field(default_factory=list)
    #: The row numbers of the first :data:`TIE_ROWS` of them.
    tie_rows: list[int] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        """No mismatch (ties are the :class:`Report`'s to judge: ``strict``)."""
        return self.mismatches == 0 and not self.problem

    def figures(self) -> tuple[Any, ...]:
        """What a table row shows of this output, all but where it ran: rows of two walks or
        devices with the same figures are one row of the table."""
        return (self.name, self.compared, self.mismatches, self.ties, self.max_abs_error, self.max_rel_error, self.problem,
                self.near_boundary, self.first_mismatches, self.first_ties, self.tie_rows)

    @property
    def where(self) -> str:
        """The device, and the walk if there is a choice."""
        return f"{self.device}, {self.walk}" if self.walk else self.device


@dataclass(frozen=True)
class Report:
    model: str
    onnx: str
    rows: int
    row_kinds: dict[str, int]
    devices: list[str]
    atol: float
    rtol: float
    outputs: list[OutputReport]
    notes: list[str] = field(default_factory=list)
    #: The runtime the graph ran on, with its version (e.g. "openvino 2026.4.1").
    runtime: str = "onnxruntime"
    #: Whether label rows at a tie fail the report (``verify --strict``).
    strict: bool = False
    #: How far apart the library's scores of two labels may lie for a label row that differs
    #: to count as a tie (see :func:`tree2mat.verify.checks.tie_bound`); 0: none counts.
    tie_bound: float = 0.0

    @property
    def ties(self) -> int:
        """Label rows at a tie, over every device and walk (see :attr:`OutputReport.ties`)."""
        return sum(o.ties for o in self.outputs)

    @property
    def passed(self) -> bool:
        return all(o.passed for o in self.outputs) and not (self.strict and self.ties)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["schema"] = REPORT_SCHEMA
        d["passed"] = self.passed
        return d

    def to_json(self) -> str:
        return json.dumps(_jsonable(self.to_dict()), indent=1, allow_nan=False)

    def summary(self) -> str:
        kinds = ", ".join(f"{v} {k}" for k, v in self.row_kinds.items() if v)
        lines = [
            f"verify {self.model} against {self.onnx}",
            f"rows: {self.rows} ({kinds}); runtime: {self.runtime}; devices: {', '.join(self.devices)}; "
            f"atol={self.atol:.3g} rtol={self.rtol:.3g}",
        ]
        lines += [f"note: {n}" for n in self.notes]
        rows = _table_rows(self.outputs)
        wide = max([6, *(len(where) for where, _ in rows)])
        named = max([14, *(len(o.name) for _, o in rows)])
        lines.append(f"{'output':<{named}} {'device':<{wide}} {'compared':>9} {'mismatch':>9} {'ties':>6} {'max abs':>10} {'max rel':>10}")
        for where, o in rows:
            rel = "-" if o.max_rel_error is None else f"{o.max_rel_error:.3g}"
            lines.append(
                f"{o.name:<{named}} {where:<{wide}} {o.compared:>9} {o.mismatches:>9} {o.ties:>6} {o.max_abs_error:>10.3g} {rel:>10}"
                + (f"  {o.problem}" if o.problem else "")
                + (f"  ({o.near_boundary} of them near a hyperplane)" if o.near_boundary else "")
            )
            for m in o.first_mismatches:
                lines.append(f"  row {m.row}: expected {m.expected!r}, got {m.got!r}; input {m.input}")
            for t in o.first_ties:
                lines.append(f"  row {t.row} (tie, library scores {t.gap:.2g} apart): expected {t.expected!r}, got {t.got!r}; input {t.input}")
            if o.ties > len(o.first_ties):
                listed = ", ".join(str(r) for r in o.tie_rows[:20])
                lines.append(f"  ties at rows {listed}{', ...' if o.ties > 20 else ''} ({o.ties}; every row number up to {TIE_ROWS} in --json)")
        if self.ties:
            lines.append(
                f"ties: {max(o.ties for o in self.outputs)} label rows differ where the library's scores of the two labels lie "
                f"within {self.tie_bound:.2g} of each other, the rounding of the sums (docs/exactness.md#ties): not mismatches"
                + (", but --strict fails them" if self.strict else " (--strict fails them)")
                + "; a --dtype float64 graph sums as the library does and gives its labels"
            )
        lines.append("PASS" if self.passed else "FAIL")
        return "\n".join(lines)


def _table_rows(outputs: list[OutputReport]) -> list[tuple[str, OutputReport]]:
    """The rows of the text table, each with where it ran: one per output unless its figures
    differ between walks or devices; each row names the devices and walks it stands for (a
    device alone: every walk)."""
    walks = list(dict.fromkeys(o.walk for o in outputs))
    groups: dict[tuple[Any, ...], list[OutputReport]] = {}
    for o in outputs:
        groups.setdefault(_key(o.figures()), []).append(o)
    rows = []
    for same in groups.values():
        devices = list(dict.fromkeys(o.device for o in same))
        ran = list(dict.fromkeys(o.walk for o in same))
        where = ", ".join(devices)
        if len(walks) > 1 and len(ran) < len(walks) or len(same) != len(devices) * len(ran):
            where = "; ".join(o.where for o in same)
        rows.append((where, same[0]))
    return rows


def _key(figures: tuple[Any, ...]) -> tuple[Any, ...]:
    """``figures`` as a dictionary key (NaN equal to NaN, lists as tuples)."""
    return tuple(repr(f) for f in figures)


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return _jsonable(obj.tolist())
    if isinstance(obj, np.generic):
        return _jsonable(obj.item())
    if isinstance(obj, float) and not np.isfinite(obj):
        return str(obj)  # "nan", "inf", "-inf": JSON has no such numbers
    return obj
