"""Stand-in processes for the recorded dockerd or watchdog: ``sleep``, started and awaited."""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from pathlib import Path

from orchestrator.localplane.processes import ProcessRecord, alive


def sleeper(tmp_path: Path, name: str) -> ProcessRecord:
    proc = subprocess.Popen(["sleep", "300"], start_new_session=True)
    return ProcessRecord(name, proc.pid, ["sleep", "300"], str(tmp_path / f"{name}.log"), "")


def wait_gone(pid: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while alive(pid):
        assert time.monotonic() < deadline, f"pid {pid} still alive after {timeout}s"
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)
        time.sleep(0.1)
