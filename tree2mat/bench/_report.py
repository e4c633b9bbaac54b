"""What ``tree2mat bench`` reports: a contender's timings per batch size, and the report as text,
JSON and a picture."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path


@dataclass
class Timing:
    batch: int
    runs: int
    rows_per_s: float
    p50_ms: float
    p90_ms: float
    p99_ms: float


@dataclass
class Contender:
    name: str
    kind: str  # "tree2mat", "peer", "native"
    convert_s: float | None = None
    file_bytes: int | None = None
    mismatched_rows: int | None = None  # rows whose outputs differ from the library's
    mismatched_labels: int | None = None  # of those, rows whose label differs (classifiers)
    peak_mib: float | None = None  # resident memory above the start: loading, comparing, timing
    timings: list[Timing] = field(default_factory=list)
    note: str = ""
    device: str = "cpu"


@dataclass
class BenchReport:
    model: str
    rows: int
    threads: int | None
    contenders: list[Contender]
    device: str = "cpu"

    def to_json(self) -> str:
        return json.dumps({"schema": 2, **asdict(self)}, indent=1)

    def summary(self) -> str:
        where = "onnxruntime CPU" if self.device == "cpu" else "onnxruntime CUDA (TreeEnsemble and predict on the CPU)"
        lines = [f"bench {self.model}: {self.rows} rows, {where}, threads {self.threads or 'default'}"]
        # The ratio is of throughputs, so it sits beside rows/s: next to the latencies it read as
        # a ratio of p50s, which it is not (rows/s comes from the mean batch time).
        head = f"{'contender':<28}{'batch':>8}{'rows/s':>12}{'x ref':>8}{'p50 ms':>10}{'p90 ms':>10}{'p99 ms':>10}"
        lines.append(head)
        reference = {t.batch: t.rows_per_s for c in self.contenders if c.kind == "peer" for t in c.timings}
        for c in self.contenders:
            if not c.timings:
                lines.append(f"{c.name:<28}  {c.note}")
                continue
            for t in c.timings:
                ratio = f"{t.rows_per_s / reference[t.batch]:.2f}" if t.batch in reference else "-"
                lines.append(f"{c.name:<28}{t.batch:>8}{t.rows_per_s:>12.4g}{ratio:>8}{t.p50_ms:>10.4g}{t.p90_ms:>10.4g}{t.p99_ms:>10.4g}")
        lines.append("")
        lines.append(f"{'contender':<28}{'convert s':>10}{'file':>12}{'peak MiB':>10}{'rows differing from the library':>33}{'labels':>8}")
        for c in self.contenders:
            conv = "-" if c.convert_s is None else f"{c.convert_s:.2f}"
            size = "-" if c.file_bytes is None else f"{c.file_bytes / 2**10:.1f} KiB"
            peak = "-" if c.peak_mib is None else f"{c.peak_mib:.0f}"
            diff = "-" if c.mismatched_rows is None else str(c.mismatched_rows)
            labels = "-" if c.mismatched_labels is None else str(c.mismatched_labels)
            lines.append(f"{c.name:<28}{conv:>10}{size:>12}{peak:>10}{diff:>33}{labels:>8}" + (f"  ({c.note})" if c.note and c.timings else ""))
        if reference:
            lines.append("x ref: rows/s over the peer TreeEnsemble graph's at the same batch size")
        return "\n".join(lines)


def plot_report(report: BenchReport) -> bytes:
    """A PNG: rows/s of every timed contender (bars, log scale) per batch size, with the ratio to
    the TreeEnsemble graph written over each bar."""
    from tree2mat.pictures import require_matplotlib

    require_matplotlib("--plot").use("Agg")
    import io

    import matplotlib.pyplot as plt

    timed = [c for c in report.contenders if c.timings]
    batches = sorted({t.batch for c in timed for t in c.timings})
    reference = {t.batch: t.rows_per_s for c in timed if c.kind == "peer" for t in c.timings}
    fig, ax = plt.subplots(figsize=(max(6.0, 1.6 * len(batches) * max(1, len(timed)) / 3), 4.5), dpi=120)
    width = 0.8 / max(1, len(timed))
    for i, c in enumerate(timed):
        by_batch = {t.batch: t.rows_per_s for t in c.timings}
        xs = [j + (i - (len(timed) - 1) / 2) * width for j, b in enumerate(batches) if b in by_batch]
        ys = [by_batch[b] for b in batches if b in by_batch]
        bars = ax.bar(xs, ys, width, label=c.name)
        for bar, b in zip(bars, [b for b in batches if b in by_batch]):
            if b in reference:
                ax.annotate(f"{by_batch[b] / reference[b]:.2f}x", (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                            ha="center", va="bottom", fontsize=7, rotation=90)
    ax.set_yscale("log")
    ax.set_xticks(range(len(batches)), [f"batch {b:,}" for b in batches])
    ax.set_ylabel("rows / s")
    where = "CPU" if report.device == "cpu" else "CUDA (TreeEnsemble, predict: CPU)"
    ax.set_title(f"{Path(report.model).name}: {report.rows:,} rows, onnxruntime {where}, threads {report.threads or 'default'}", fontsize=9)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return buf.getvalue()
