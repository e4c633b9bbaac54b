"""The report of a check: per output and device, rows compared, mismatches, the largest
errors and the first rows that differ (:class:`Report`, JSON schema :data:`REPORT_SCHEMA`)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

REPORT_SCHEMA = 2


@dataclass(frozen=True)
class Mismatch:
    row: int
    input: list[float]
    expected: Any
    got: Any


@dataclass(frozen=True)
class OutputReport:
    """One output (or ``routing``) on one device."""

    name: str
    device: str
    compared: int
    mismatches: int
    max_abs_error: float
    max_rel_error: float
    first_mismatches: list[Mismatch] = field(default_factory=list)
    problem: str = ""  # structural problem (missing output, wrong shape), if any
    #: Which of the graph's walks ran (traverse: ``>N rows`` or ``<=N rows``, see :func:`tree2mat.verify.walks`),
    #: or empty: a graph with one.
    walk: str = ""
    #: Of the mismatched rows, those within float rounding of an oblique node's hyperplane on
    #: their path (:func:`tree2mat.ir.evaluate.near_hyperplanes`): a sum of w . x in another
    #: order, or with fused multiply-adds, routes them otherwise. Still mismatches: counted apart.
    near_boundary: int = 0

    @property
    def passed(self) -> bool:
        return self.mismatches == 0 and not self.problem

    @property
    def title(self) -> str:
        """The output's name, and the walk if there is a choice."""
        return f"{self.name} ({self.walk})" if self.walk else self.name

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

    @property
    def passed(self) -> bool:
        return all(o.passed for o in self.outputs)

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
        wide = max([6, *(len(o.where) for o in self.outputs)])
        lines.append(f"{'output':<14} {'device':<{wide}} {'compared':>9} {'mismatch':>9} {'max abs':>10} {'max rel':>10}")
        for o in self.outputs:
            lines.append(
                f"{o.name:<14} {o.where:<{wide}} {o.compared:>9} {o.mismatches:>9} "
                f"{o.max_abs_error:>10.3g} {o.max_rel_error:>10.3g}"
                + (f"  {o.problem}" if o.problem else "")
                + (f"  ({o.near_boundary} of them near a hyperplane)" if o.near_boundary else "")
            )
            for m in o.first_mismatches:
                lines.append(f"  row {m.row}: expected {m.expected!r}, got {m.got!r}; input {m.input}")
        lines.append("PASS" if self.passed else "FAIL")
        return "\n".join(lines)


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
