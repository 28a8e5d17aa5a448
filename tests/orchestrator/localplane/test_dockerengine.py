"""dockerd's life cycle without Docker: its command line, status, TTL and down.

A stand-in process plays the recorded dockerd (or watchdog); the Docker tests run the real one.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from orchestrator.localplane import dockerengine, hostnet, ttl
from orchestrator.localplane.processes import ProcessRecord, load_records, save_records
from tests.orchestrator.localplane.standins import sleeper, wait_gone


def test_argv_keeps_everything_under_the_state_dir() -> None:
    state = Path("/s")
    argv = dockerengine.dockerd_argv("/usr/sbin/dockerd", state, state / "runtime" / "fc-runc")
    assert argv[0] == "/usr/sbin/dockerd"
    assert "--host=unix:///s/docker.sock" in argv
    assert "--data-root=/s/data" in argv
    assert "--exec-root=/s/exec" in argv
    assert "--pidfile=/s/docker.pid" in argv
    assert f"--add-runtime={dockerengine.RUNTIME_NAME}=/s/runtime/fc-runc" in argv
    assert f"--default-runtime={dockerengine.RUNTIME_NAME}" in argv
    assert f"--bridge={hostnet.BRIDGE}" in argv
    assert len(hostnet.BRIDGE) <= 15  # Linux interface name limit


def test_launcher_runs_the_wrapper_isolated_then_runc() -> None:
    text = dockerengine.runtime_launcher("/usr/bin/python3", "/usr/sbin/runc")
    assert text.startswith("#!/bin/sh\nexec /usr/bin/python3 -I ")
    assert 'ociwrapper.py --runc /usr/sbin/runc -- "$@"' in text


def test_status_of_an_empty_state_dir(tmp_path: Path) -> None:
    st = dockerengine.DockerEngine(tmp_path).status()
    assert (st.pid, st.running, st.healthy, st.version) == (None, False, False, None)
    assert st.docker_host == f"unix://{tmp_path.resolve()}/docker.sock"


def test_default_state_dir_honours_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CALIBRATOR_DOCKER_DIR", str(tmp_path))
    assert dockerengine.default_state_dir() == tmp_path


def test_the_watchdog_watches_only_the_dockerd_it_was_started_for(tmp_path: Path) -> None:
    engine = dockerengine.DockerEngine(tmp_path)
    fake = sleeper(tmp_path, "dockerd")
    try:
        save_records(engine.state_file, [fake], {})
        assert engine.runs(fake.pid)
        assert not engine.runs(fake.pid + 1)  # restarted: another dockerd
        save_records(engine.state_file, [], {})
        assert not engine.runs(fake.pid)  # stopped by down
    finally:
        subprocess.run(["kill", str(fake.pid)], check=False)
        wait_gone(fake.pid)


def test_down_stops_the_recorded_watchdog(tmp_path: Path) -> None:
    engine = dockerengine.DockerEngine(tmp_path)
    dog = sleeper(tmp_path, "watchdog")
    save_records(engine.state_file, [], {"watchdogPid": dog.pid, "watchdogDeadline": 1e12})
    engine.down()
    wait_gone(dog.pid)


def test_arming_records_the_watchdog_and_replaces_the_previous_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = dockerengine.DockerEngine(tmp_path)
    old = sleeper(tmp_path, "watchdog")
    record = ProcessRecord("dockerd", 4242, [], "", "")
    save_records(engine.state_file, [record], {"watchdogPid": old.pid, "bridge": "b"})
    spawned: list[tuple[Path, int, tuple[str, ...]]] = []

    def spawn(state_dir: Path, ttl_seconds: int, log: Path, *target: str) -> int:
        spawned.append((state_dir, ttl_seconds, target))
        return 777000

    monkeypatch.setattr(ttl, "spawn_watchdog", spawn)
    before = time.time()
    engine._arm_watchdog(60, lambda _: None)
    wait_gone(old.pid)
    assert spawned == [(engine.state_dir, 60, ("docker", "4242"))]
    records, extra = load_records(engine.state_file)
    assert records == [record]
    assert extra["watchdogPid"] == 777000 and extra["bridge"] == "b"
    assert before + 60 <= float(str(extra["watchdogDeadline"])) <= time.time() + 60


def test_down_removes_only_a_bridge_its_up_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    removed: list[bool] = []
    monkeypatch.setattr(hostnet, "remove_bridge", lambda: removed.append(True))
    engine = dockerengine.DockerEngine(tmp_path)
    engine.down()  # nothing recorded: another engine's bridge in this namespace is left alone
    assert removed == []
    save_records(engine.state_file, [], {"bridge": hostnet.BRIDGE})
    engine.down()
    assert removed == [True]
