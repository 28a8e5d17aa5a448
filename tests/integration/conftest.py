"""The running local management plane, shared by every integration test of the session.

It is started for real (etcd, kube-apiserver, the four CAPI managers from tools/build.sh) and never
skipped: if it cannot start, every integration test errors with the component's log lines. A TTL
watchdog stops it even if pytest is killed.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client
from kubernetes.dynamic import DynamicClient

from orchestrator.kube.client import api_client, dynamic
from orchestrator.localplane.plane import LocalPlane
from orchestrator.localplane.processes import alive

PLANE_TTL_SECONDS = 5400


@pytest.fixture(scope="session")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalPlane]:
    state = Path(tmp_path_factory.mktemp("localplane"))
    local = LocalPlane(state)
    local.up(
        timeout=300,
        ttl_seconds=PLANE_TTL_SECONDS,
        progress=lambda m: print(f"[localplane] {m}", flush=True),
    )
    yield local
    pids = [c.pid for c in local.status().components if c.pid]
    local.down(purge=True)
    assert not [p for p in pids if alive(p)], "down left processes running"


@pytest.fixture(scope="session")
def mgmt(plane: LocalPlane) -> client.ApiClient:
    return api_client(plane.kubeconfig)


@pytest.fixture(scope="session")
def dyn(mgmt: client.ApiClient) -> DynamicClient:
    return dynamic(mgmt)
