"""The test tiers, from measured durations: every test whose setup and call took ``SLOW_S``
seconds or more in a run of the suite as ``make test`` runs it (two workers on two cores) is in
``tests/slow.txt``, which conftest.py marks ``slow``: ``make test-fast`` leaves those out.

    make test-tiers   # runs the suite with pytest's --durations, then this on its log

    python tests/tiers.py LOG [LOG ...] > tests/slow.txt

Tests already marked ``@pytest.mark.slow`` by their subject (the runtime matrix, the corpus, the
builds) stay so whatever they take. A test that is slow only because it sets up a fixture that
others share passes that setup on to the next test: run the tiers again until the fast tier's
run is as measured (docs/development.md).
"""

from __future__ import annotations

import re
import sys
from collections import defaultdict

#: A test that takes this long (seconds, setup and call) is slow: at 3 s the fast tier ran 3 min 9 s on
#: 2 cores (2026-11-29), at 0.4 s it fits the minute docs/development.md gives it.
SLOW_S = 0.4

_LINE = re.compile(r"^\s*([0-9.]+)s\s+(setup|call|teardown)\s+(\S.*?)\s*$")


def slow_tests(lines: list[str], slow_s: float = SLOW_S) -> list[str]:
    """The node ids of ``pytest --durations`` lines whose phases add up to ``slow_s`` or more."""
    total: dict[str, float] = defaultdict(float)
    for line in lines:
        m = _LINE.match(line)
        if m:
            total[m.group(3)] += float(m.group(1))
    return sorted(node for node, seconds in total.items() if seconds >= slow_s)


def main(paths: list[str]) -> None:
    lines = [line for path in paths for line in open(path, encoding="utf-8", errors="replace")]
    found = slow_tests(lines)
    print(f"# Tests of {SLOW_S:g} s or more (setup and call) in a make test run: tests/tiers.py; marked slow by conftest.py.")
    for node in found:
        print(node)


if __name__ == "__main__":
    main(sys.argv[1:])
