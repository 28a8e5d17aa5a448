"""Stop a local plane after a time-to-live: ``python -m orchestrator.localplane.watchdog DIR TTL``.

Tests and demos start the plane with a TTL so that no server outlives its run even when the test
process is killed; ``down`` stops the watchdog itself.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from orchestrator.localplane.plane import LocalPlane


def main() -> int:
    """Sleep in bounded steps until the deadline, then stop the plane (keeping its data)."""
    state_dir, ttl = Path(sys.argv[1]), float(sys.argv[2])
    deadline = time.monotonic() + ttl
    while time.monotonic() < deadline:
        if not (state_dir / "state.json").exists():
            return 0
        time.sleep(min(5.0, max(0.0, deadline - time.monotonic())))
    stopped = LocalPlane(state_dir).down()
    print(
        f"watchdog: TTL of {ttl:.0f}s reached; stopped {', '.join(stopped) or 'nothing'}",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
