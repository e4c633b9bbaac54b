"""Progress of a long command on stderr: a bar on a terminal, lines elsewhere."""

from __future__ import annotations

import sys
import time
from typing import Any

import typer

#: A convert shows its steps only once it has run this long (seconds): a quick one prints nothing.
PROGRESS_DELAY_S = 1.0


class _Progress:
    """Progress of a long run on stderr: a live bar on a terminal; elsewhere (CI logs, pipes)
    plain lines. ``update`` (verify: rows read) prints a line at every further 10 % and nothing
    for a run done in one step; ``stage`` (convert: its steps) a line per step, from the first
    step that begins ``delay`` seconds or more after the start."""

    def __init__(self, label: str, enabled: bool = True, delay: float = 0.0) -> None:
        self.label, self.enabled, self.delay = label, enabled, delay
        self.start = time.monotonic()
        self.bar: Any = None
        self.task: Any = None
        self.next_line = 0.1
        self.steps = 0
        self.last_stage = ""

    def __enter__(self) -> _Progress:
        return self

    def update(self, rows: int, fraction: float) -> None:
        self.steps += 1
        if not self.enabled or (self.steps == 1 and fraction >= 1.0):
            return
        if sys.stderr.isatty():
            self._bar(fraction, f"{rows:,} rows", eta=True)
        elif fraction >= self.next_line or fraction >= 1.0:
            typer.echo(f"{self.label}: {rows:,} rows ({100 * fraction:.0f}% of the data read)", err=True)
            self.next_line = (int(fraction * 10) + 1) / 10

    def stage(self, text: str, total: int) -> None:
        name = text.split(" (")[0]  # ("reading the model (1,200 of 5,000 trees)": still the step it was)
        if name != self.last_stage:
            self.steps, self.last_stage = self.steps + 1, name
        if not self.enabled or time.monotonic() - self.start < self.delay:
            return
        if sys.stderr.isatty():
            self._bar((self.steps - 1) / total, text, eta=False)
        else:
            typer.echo(f"{self.label}: {text} (step {self.steps} of {total})", err=True)

    def line(self, text: str, fraction: float) -> None:
        """A line that stays (learn: an epoch's accuracies), under a bar at ``fraction`` on a
        terminal."""
        if not self.enabled:
            return
        if sys.stderr.isatty():
            self._bar(fraction, "", eta=True)
            self.bar.console.print(f"{self.label}: {text}", highlight=False, markup=False)
        else:
            typer.echo(f"{self.label}: {text}", err=True)

    def _bar(self, fraction: float, text: str, eta: bool) -> None:
        if self.bar is None:
            from rich.console import Console
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

            self.bar = Progress(TextColumn(self.label), BarColumn(), TextColumn("{task.percentage:>3.0f}%  {task.fields[what]}"),
                                TimeRemainingColumn() if eta else TimeElapsedColumn(), transient=True,
                                console=Console(stderr=True))  # stdout is for results (--json -)
            self.bar.start()
            self.task = self.bar.add_task(self.label, total=1.0, what="")
        self.bar.update(self.task, completed=fraction, what=text)

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.stop()
