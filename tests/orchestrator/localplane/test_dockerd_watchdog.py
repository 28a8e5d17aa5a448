"""dockerd's TTL watchdog, without Docker: a stand-in process is the recorded "dockerd"."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from orchestrator.localplane import dockerd, watchdog
from orchestrator.localplane.processes import (
    ProcessRecord,
    _reap,
    alive,
    load_records,
    save_records,
)


def _sleeper(tmp_path: Path, name: str) -> ProcessRecord:
    proc = subprocess.Popen(["sleep", "300"], start_new_session=True)
    return ProcessRecord(name, proc.pid, ["sleep", "300"], str(tmp_path / f"{name}.log"), "")


def _wait_gone(pid: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while alive(pid):
        assert time.monotonic() < deadline, f"pid {pid} still alive after {timeout}s"
        _reap(pid)
        time.sleep(0.1)


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


def test_remaining_ttl_of_a_recorded_deadline() -> None:
    assert dockerd._remaining(None) == 0
    assert dockerd._remaining(True) == 0
    assert dockerd._remaining(time.time() - 5) == 0
    assert 50 <= dockerd._remaining(time.time() + 60) <= 60


def test_the_watchdog_watches_only_the_dockerd_it_was_started_for(tmp_path: Path) -> None:
    engine = dockerd.DockerEngine(tmp_path)
    fake = _sleeper(tmp_path, "dockerd")
    try:
        save_records(engine.state_file, [fake], {})
        assert engine.runs(fake.pid)
        assert not engine.runs(fake.pid + 1)  # restarted: another dockerd
        save_records(engine.state_file, [], {})
        assert not engine.runs(fake.pid)  # stopped by down
    finally:
        subprocess.run(["kill", str(fake.pid)], check=False)
        _wait_gone(fake.pid)


def test_down_stops_the_recorded_watchdog(tmp_path: Path) -> None:
    engine = dockerd.DockerEngine(tmp_path)
    dog = _sleeper(tmp_path, "watchdog")
    save_records(engine.state_file, [], {"watchdogPid": dog.pid, "watchdogDeadline": 1e12})
    engine.down()
    _wait_gone(dog.pid)


def test_arming_records_the_watchdog_and_replaces_the_previous_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = dockerd.DockerEngine(tmp_path)
    old = _sleeper(tmp_path, "watchdog")
    record = ProcessRecord("dockerd", 4242, [], "", "")
    save_records(engine.state_file, [record], {"watchdogPid": old.pid, "bridge": "b"})
    spawned: list[tuple[int, int]] = []

    def spawn(ttl: int, pid: int) -> int:
        spawned.append((ttl, pid))
        return 777000

    monkeypatch.setattr(engine, "_spawn_watchdog", spawn)
    before = time.time()
    engine._arm_watchdog(60, lambda _: None)
    _wait_gone(old.pid)
    assert spawned == [(60, 4242)]
    records, extra = load_records(engine.state_file)
    assert records == [record]
    assert extra["watchdogPid"] == 777000 and extra["bridge"] == "b"
    assert before + 60 <= float(str(extra["watchdogDeadline"])) <= time.time() + 60


def test_the_docker_watchdog_stops_the_engine_when_the_ttl_elapses(tmp_path: Path) -> None:
    """The real watchdog process, a TTL of 1 s, a stand-in dockerd (no socket: no containers)."""
    engine = dockerd.DockerEngine(tmp_path)
    fake = _sleeper(tmp_path, "dockerd")
    save_records(engine.state_file, [fake], {})
    argv = [sys.executable, "-m", "orchestrator.localplane.watchdog", str(tmp_path), "1"]
    done = subprocess.run(
        [*argv, "docker", str(fake.pid)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    _wait_gone(fake.pid)
    assert "TTL of 1s reached" in done.stdout and f"dockerd pid {fake.pid} stopped" in done.stdout
    assert load_records(engine.state_file)[0] == []


def test_the_docker_watchdog_leaves_a_restarted_engine_alone(tmp_path: Path) -> None:
    engine = dockerd.DockerEngine(tmp_path)
    fake = _sleeper(tmp_path, "dockerd")
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
        _wait_gone(fake.pid)


def test_down_removes_only_a_bridge_its_up_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    removed: list[bool] = []
    monkeypatch.setattr(dockerd, "_remove_bridge", lambda: removed.append(True))
    engine = dockerd.DockerEngine(tmp_path)
    engine.down()  # nothing recorded: another engine's bridge in this namespace is left alone
    assert removed == []
    save_records(engine.state_file, [], {"bridge": dockerd.BRIDGE})
    engine.down()
    assert removed == [True]
