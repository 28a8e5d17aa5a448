"""Process settings of the ``calibrator`` process (CLI commands and the Temporal worker alike).

Planning and placement allocate millions of short-lived objects next to a large, long-lived
FleetSnapshot. With CPython's default thresholds (700, 10, 10) the cyclic collector runs about
150 times during one 1,000-cluster / 10,000-workload placement and re-scans the snapshot's
objects each time it reaches the older generations, 10-14 % of the run
(benchmarks/bench_place.py prints both). Our objects form no garbage cycles worth collecting
promptly, so the young generation is collected less often; memory held by uncollected cycles is
bounded by the 50,000-allocation window.

A one-shot command (``drift``, ``plan``, ``check``, ``place``) goes further: it reads a fleet,
computes one answer, prints it and exits, so the collector only costs time there (40 young and
2 middle collections, 6-9 % of a 1k x 10k ``place``) and frees nothing that matters: peak
RSS of that run is the same with the collector off (docs/benchmarks.md). ``without_gc`` turns
it off for the command's body; a long-lived process (the worker) keeps the thresholds.
"""

from __future__ import annotations

import functools
import gc
from collections.abc import Callable
from typing import ParamSpec, TypeVar

GC_THRESHOLDS = (50_000, 50, 50)

P = ParamSpec("P")
R = TypeVar("R")


def tune_gc() -> None:
    """Apply GC_THRESHOLDS to this process (once, at start-up)."""
    gc.set_threshold(*GC_THRESHOLDS)


def without_gc(func: Callable[P, R]) -> Callable[P, R]:
    """Run ``func`` with the cyclic collector off (as it was before, afterwards)."""

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        was = gc.isenabled()
        gc.disable()
        try:
            return func(*args, **kwargs)
        finally:
            if was:
                gc.enable()

    return wrapper
