"""The plane's own contract: idempotent up, status, and repair after a component crash."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from orchestrator.localplane.plane import LocalPlane
from orchestrator.localplane.processes import alive
from testkit.capi_waits import wait_for

pytestmark = pytest.mark.integration


def test_status_reports_every_component_healthy(plane: LocalPlane) -> None:
    status = plane.status()
    assert status.healthy
    assert [c.name for c in status.components] == [
        "etcd",
        "kube-apiserver",
        "capi",
        "kubeadm-bootstrap",
        "kubeadm-control-plane",
        "capd",
    ]
    assert status.versions == {"kubernetes": "v1.35.8", "etcd": "v3.6.16", "clusterAPI": "v1.13.4"}


def test_env_status_cli_json(plane: LocalPlane) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "from orchestrator.cli.main import main; main()",
            "env",
            "status",
            "--state-dir",
            str(plane.state_dir),
            "-o",
            "json",
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert '"healthy": true' in proc.stdout


def test_second_up_is_a_no_op(plane: LocalPlane) -> None:
    before = {c.name: c.pid for c in plane.status().components}
    plane.up(timeout=60)
    assert {c.name: c.pid for c in plane.status().components} == before


def test_up_repairs_a_crashed_component(plane: LocalPlane) -> None:
    capd = next(c for c in plane.status().components if c.name == "capd")
    pid = capd.pid
    assert pid is not None
    os.killpg(pid, signal.SIGKILL)
    wait_for("capd gone", lambda: not alive(pid), 30, interval=0.2)
    assert not plane.status().healthy
    plane.up(timeout=300)
    status = plane.status()
    assert status.healthy
    assert next(c for c in status.components if c.name == "capd").pid != capd.pid
    # The repair kept the plane's TTL: a watchdog runs again (the session's plane must not
    # outlive its run because a test repaired it).
    watchdog = json.loads(plane.state_file.read_text()).get("watchdogPid")
    assert isinstance(watchdog, int) and alive(watchdog), watchdog
