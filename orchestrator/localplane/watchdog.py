"""Stop a local plane or our dockerd after a time-to-live.

``python -m orchestrator.localplane.watchdog DIR TTL [plane | docker DOCKERD_PID]``

Tests and demos start the plane (and ``env up --provider docker`` its dockerd) with a TTL so that
no server outlives its run even when the test process is killed; ``down`` stops the watchdog
itself. For ``docker`` DIR is dockerd's state dir and the watchdog runs the engine's ``down``
(every container of the engine removed, then dockerd stopped, images kept) unless the engine
no longer runs as DOCKERD_PID by then (stopped, or restarted with a watchdog of its own).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

from orchestrator.localplane.dockerengine import DockerEngine
from orchestrator.localplane.plane import LocalPlane


def watch(
    ttl: float,
    still_wanted: Callable[[], bool],
    stop_all: Callable[[], list[str]],
    step: float = 5.0,
) -> list[str] | None:
    """Sleep in bounded steps until ``ttl`` elapses, then ``stop_all``; the names it stopped.

    Returns None without stopping anything as soon as ``still_wanted`` is false (the service was
    stopped, or another watchdog took over).
    """
    deadline = time.monotonic() + ttl
    while True:
        if not still_wanted():
            return None
        left = deadline - time.monotonic()
        if left <= 0:
            return stop_all()
        time.sleep(min(step, left))


def _plane(state_dir: Path) -> tuple[Callable[[], bool], Callable[[], list[str]]]:
    return (state_dir / "state.json").exists, LocalPlane(state_dir).down


def _docker(
    state_dir: Path, dockerd_pid: int
) -> tuple[Callable[[], bool], Callable[[], list[str]]]:
    engine = DockerEngine(state_dir)

    def stop_all() -> list[str]:
        names: list[str] = []
        engine.down(progress=names.append)
        return names

    return (lambda: engine.runs(dockerd_pid)), stop_all


def main() -> int:
    """Watch the plane (default) or the engine named by the arguments."""
    state_dir, ttl = Path(sys.argv[1]), float(sys.argv[2])
    if sys.argv[3:4] == ["docker"]:
        still_wanted, stop_all = _docker(state_dir, int(sys.argv[4]))
    else:
        still_wanted, stop_all = _plane(state_dir)
    stopped = watch(ttl, still_wanted, stop_all)
    if stopped is not None:
        print(
            f"watchdog: TTL of {ttl:.0f}s reached; stopped {'; '.join(stopped) or 'nothing'}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
