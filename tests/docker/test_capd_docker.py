"""One CAPD docker cluster, 1 control plane + 1 worker at v1.34.12, to Ready Nodes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from benchmarks.bench_capd_docker import create_and_time
from orchestrator.localplane import dockerenv
from orchestrator.localplane.dockerengine import DockerEngine
from orchestrator.localplane.plane import LocalPlane

pytestmark = pytest.mark.docker
VERSION = "v1.34.12"


@pytest.mark.timeout(1800)
def test_capd_docker_cluster_gets_ready_nodes(tmp_path: Path) -> None:
    plane = LocalPlane(tmp_path / "plane")
    # $CALIBRATOR_DOCKER_DIR keeps loaded images between runs (1.5 GB per node image).
    docker_dir = Path(os.environ.get("CALIBRATOR_DOCKER_DIR") or tmp_path / "docker")
    try:
        started = dockerenv.up(
            plane,
            docker_state_dir=docker_dir,
            node_versions=[VERSION],
            ttl_seconds=1800,
            progress=lambda m: print(f"[env] {m}", flush=True),
        )
        print(f"[env] up: {started.seconds}", flush=True)
        doc = create_and_time(plane, "it1", VERSION, timeout=900)
        print(f"[capd] {doc['seconds']}", flush=True)
        assert doc["complete"], f"milestones never reached: {doc['missing']}"
        assert len(doc["nodes"]) == 2
        for node in doc["nodes"].values():
            assert node["ready"]
            assert node["kubelet"] == VERSION
    finally:
        stopped = dockerenv.down(plane, purge=True, progress=print)
        print(f"[env] stopped: {stopped}", flush=True)
    engine = DockerEngine(docker_dir)
    assert not engine.status().running, "env down left dockerd running"
