"""A service's time-to-live: the detached watchdog that enforces it, started and stopped.

The plane and our dockerd each record their watchdog in their ``state.json`` (``watchdogPid``,
``watchdogDeadline``); ``down`` stops it, and a service restarted without a TTL of its own keeps
what was left of the one it had (:func:`remaining`). The watchdog process itself, and the
command line it is started with, is :mod:`orchestrator.localplane.watchdog`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from orchestrator.localplane.processes import ProcessRecord, alive, stop


def spawn_watchdog(state_dir: Path, ttl_seconds: int, log: Path, *target: str) -> int:
    """Start ``python -m orchestrator.localplane.watchdog`` detached; its pid.

    ``target`` is what it watches after the state dir and TTL (nothing for the plane,
    ``docker DOCKERD_PID`` for an engine); it appends to ``log``.
    """
    log.parent.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "orchestrator.localplane.watchdog", str(state_dir),
            str(ttl_seconds), *target]  # fmt: skip
    with log.open("ab") as out:
        proc = subprocess.Popen(
            argv,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    return proc.pid


def deadline(ttl_seconds: int) -> float:
    """The epoch second a TTL that starts now runs out (``watchdogDeadline``)."""
    return time.time() + ttl_seconds


def remaining(recorded_deadline: object) -> int:
    """Whole seconds until ``recorded_deadline`` (epoch seconds), 0 when absent or past."""
    if isinstance(recorded_deadline, bool) or not isinstance(recorded_deadline, int | float):
        return 0
    return max(0, int(recorded_deadline - time.time()))


def stop_watchdog(pid: object, timeout: float) -> None:
    """Stop the recorded watchdog ``pid``, unless it is gone or is this process.

    A watchdog whose TTL ran out calls ``down`` itself, and must not stop itself halfway.
    """
    if isinstance(pid, int) and not isinstance(pid, bool) and pid != os.getpid() and alive(pid):
        stop(ProcessRecord("watchdog", pid, [], "", ""), timeout)
