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

Such a command also ends without tearing its objects down: freeing the snapshot, the result
and the document one by one took 0.23 s of CPU after the 1k x 10k ``place`` output was written
(8 % of the run). ``quick_exit`` flushes stdout and stderr and ends the process at once
(``os._exit``), but only in the ``calibrator`` process itself (``main`` calls
``allow_quick_exit``); an in-process caller, such as a test's CliRunner, gets the ordinary
``SystemExit``. Nothing those commands do needs atexit handlers or finalizers.
"""

from __future__ import annotations

import functools
import gc
import os
import sys
from collections.abc import Callable
from typing import ParamSpec, TypeVar

GC_THRESHOLDS = (50_000, 50, 50)

_quick_exit = False

P = ParamSpec("P")
R = TypeVar("R")


def tune_gc() -> None:
    """Apply GC_THRESHOLDS to this process (once, at start-up)."""
    gc.set_threshold(*GC_THRESHOLDS)


def allow_quick_exit() -> None:
    """Let ``quick_exit`` end the process: called by ``main``, the ``calibrator`` process alone."""
    global _quick_exit  # noqa: PLW0603 - one process-wide switch, set once by main()
    _quick_exit = True


def quick_exit(code: int) -> None:
    """End the process with ``code`` now, output flushed, when allowed; else return.

    A flush that fails (stdout closed early, as by ``| head``) returns too, so the ordinary
    exit reports it as it always did.
    """
    if not _quick_exit:
        return
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        return
    os._exit(code)


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
