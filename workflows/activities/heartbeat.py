"""A heartbeat that keeps going while an activity waits on calls that report no progress."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import TypeVar

from temporalio import activity

D = TypeVar("D")


@contextlib.asynccontextmanager
async def heartbeating(first: D) -> AsyncIterator[Callable[[D], None]]:
    """Heartbeat progress as it comes, and the latest again every third of the heartbeat timeout.

    Some backend calls report no progress of their own: one LIST of thousands of FleetWorkloads
    on a worker running 20 re-placements at once outlasted a 30-s heartbeat timeout (the
    100-cluster benchmark with 1,000 workloads, 2026-12-03), and at 300 clusters the rollout
    polls' LISTs of Machines did, on an API server CAPI kept busy: every attempt of 40 clusters'
    waits was cancelled at its heartbeat timeout although the worker was alive (2026-12-06). The
    ticker shows the worker alive and stops with it, so a dead worker is still noticed; each
    request has its own timeout and bounded retries (``client.harden``), and the activity's
    start-to-close timeout bounds the attempt. Without a heartbeat timeout (tests,
    ``ActivityEnvironment``) nothing ticks.
    """
    timeout = activity.info().heartbeat_timeout
    latest = [first]

    def beat(details: D) -> None:
        latest[0] = details
        activity.heartbeat(details)

    async def tick(interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            activity.heartbeat(latest[0])

    ticker = asyncio.ensure_future(tick(timeout.total_seconds() / 3)) if timeout else None
    beat(first)
    try:
        yield beat
    finally:
        if ticker is not None:
            ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await ticker
