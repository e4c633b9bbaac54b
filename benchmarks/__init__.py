"""The benchmark scripts, each run from the repository root as ``python -m benchmarks.NAME``
(README.md lists them). They are clients of tree2mat's public API; what several share (the
workloads, their data, sessions and timing, where fitted constants go) is in ``_common``, the
runtime matrix's models in ``_cases`` (which tests/runtimes reads too: the tests import the
benchmarks, never the reverse)."""
