"""A row of the README's support table (see tree2mat.support)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SupportRow:
    task: str
    missing: str
    notes: str = ""
