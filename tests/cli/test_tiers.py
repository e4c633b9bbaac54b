"""tests/tiers.py reads pytest's own --durations report: a test that sleeps past the limit is
slow, one that does not is not."""

from __future__ import annotations

import subprocess
import sys

from tiers import slow_tests


def test_the_tiers_are_read_from_pytests_durations(tmp_path):
    (tmp_path / "test_two.py").write_text(
        "import time\n\n\ndef test_quick():\n    pass\n\n\ndef test_sleepy():\n    time.sleep(0.6)\n"
    )
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--durations=0", "--durations-min=0",
                          "test_two.py"], cwd=tmp_path, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    assert slow_tests(run.stdout.splitlines(), slow_s=0.5) == ["test_two.py::test_sleepy"]
