"""The TTL watchdog: its loop, and the real process against a stand-in dockerd (no Docker)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from orchestrator.localplane import watchdog
from orchestrator.localplane.dockerengine import DockerEngine
from orchestrator.localplane.processes import alive, load_records, save_records
from tests.orchestrator.localplane.standins import sleeper, wait_gone


def _recording(calls: list[str]) -> list[str]:
    calls.append("down")
    return ["x"]


def test_watch_stops_once_the_ttl_elapsed() -> None:
    calls: list[str] = []
    assert watchdog.watch(0.0, lambda: True, lambda: _recording(calls)) == ["x"]
    assert calls == ["down"]


def test_watch_gives_up_when_the_service_is_gone_or_taken_over() -> None:
    calls: list[str] = []
    assert watchdog.watch(3600.0, lambda: False, lambda: _recording(calls)) is None
    assert calls == []


def test_the_docker_watchdog_stops_the_engine_when_the_ttl_elapses(tmp_path: Path) -> None:
    """The real watchdog process, a TTL of 1 s, a stand-in dockerd (no socket: no containers)."""
    engine = DockerEngine(tmp_path)
    fake = sleeper(tmp_path, "dockerd")
    save_records(engine.state_file, [fake], {})
    argv = [sys.executable, "-m", "orchestrator.localplane.watchdog", str(tmp_path), "1"]
    done = subprocess.run(
        [*argv, "docker", str(fake.pid)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    wait_gone(fake.pid)
    assert "TTL of 1s reached" in done.stdout and f"dockerd pid {fake.pid} stopped" in done.stdout
    assert load_records(engine.state_file)[0] == []


def test_the_docker_watchdog_leaves_a_restarted_engine_alone(tmp_path: Path) -> None:
    engine = DockerEngine(tmp_path)
    fake = sleeper(tmp_path, "dockerd")
    try:
        save_records(engine.state_file, [fake], {})
        argv = [sys.executable, "-m", "orchestrator.localplane.watchdog", str(tmp_path), "0"]
        done = subprocess.run(
            [*argv, "docker", str(fake.pid + 1)],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert done.returncode == 0 and done.stdout == "", done
        assert alive(fake.pid)
    finally:
        subprocess.run(["kill", str(fake.pid)], check=False)
        wait_gone(fake.pid)
