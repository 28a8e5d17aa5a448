"""Process settings of the ``calibrator`` process (CLI commands and the Temporal worker alike).

Planning and placement allocate millions of short-lived objects next to a large, long-lived
FleetSnapshot. With CPython's default thresholds (700, 10, 10) the cyclic collector runs about
150 times during one 1,000-cluster / 10,000-workload placement and re-scans the snapshot's
objects each time it reaches the older generations, 10-14 % of the run
(benchmarks/bench_place.py prints both). Our objects form no garbage cycles worth collecting
promptly, so the young generation is collected less often; memory held by uncollected cycles is
bounded by the 50,000-allocation window.
"""

from __future__ import annotations

import gc

GC_THRESHOLDS = (50_000, 50, 50)


def tune_gc() -> None:
    """Apply GC_THRESHOLDS to this process (once, at start-up)."""
    gc.set_threshold(*GC_THRESHOLDS)
