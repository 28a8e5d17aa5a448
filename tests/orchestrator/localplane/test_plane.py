"""One plane component stopped, restarted, frozen and continued, as the fault drills do.

A small HTTP server stands in for a component: the methods act on the process recorded in
``state.json`` by pid, so any process with a health URL exercises them (the integration drills in
tests/integration/test_stuck_and_outage.py use the real kube-apiserver and CABPK).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.localplane.plane import LocalPlane
from orchestrator.localplane.processes import (
    PlaneError,
    alive,
    free_port,
    healthy,
    load_records,
    save_records,
    start,
    wait_until,
)


@pytest.fixture
def plane(tmp_path: Path) -> Iterator[LocalPlane]:
    port = free_port()
    argv = [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"]
    record = start("web", argv, tmp_path / "logs" / "web.log", f"http://127.0.0.1:{port}/")
    local = LocalPlane(tmp_path)
    save_records(local.state_file, [record], {"ports": {"web": port}})
    wait_until("web", lambda: healthy(record.health_url), 30, record)
    try:
        yield local
    finally:
        records, _ = load_records(local.state_file)
        if records and alive(records[0].pid):
            local.resume_component("web")  # a frozen process would ignore SIGTERM until SIGKILL
        local.down()


def test_stop_then_start_keeps_the_record_and_replaces_the_pid(plane: LocalPlane) -> None:
    (before,) = load_records(plane.state_file)[0]
    with pytest.raises(PlaneError, match="still running"):
        plane.start_component("web", timeout=30)
    plane.stop_component("web")
    assert not alive(before.pid)
    assert not plane.status().healthy  # reported down, still recorded
    status = plane.start_component("web", timeout=30)
    assert status.healthy and status.pid != before.pid
    records, extra = load_records(plane.state_file)
    assert [(r.name, r.argv, r.pid) for r in records] == [("web", before.argv, status.pid)]
    assert extra == {"ports": {"web": int(before.argv[3])}}  # the rest of the state is kept
    assert status.pid is not None
    assert plane.down() == ["web"] and not alive(status.pid)


def test_pause_freezes_until_resume(plane: LocalPlane) -> None:
    (record,) = load_records(plane.state_file)[0]
    plane.pause_component("web")
    assert alive(record.pid) and not healthy(record.health_url, timeout=1.0)
    status = plane.resume_component("web", timeout=30)
    assert status.healthy and status.pid == record.pid


def test_unknown_component_is_refused(plane: LocalPlane) -> None:
    with pytest.raises(PlaneError, match=r"no component 'etcd'.*components: web"):
        plane.stop_component("etcd")
