"""A calibration under API faults: the worker reaches kube-apiserver only through a proxy that
fails 15 % of its requests (409 on writes, 429 with Retry-After, 500, 503, connection resets,
answers held past the client's timeout), on the real Temporal dev server and the local plane.

Three clusters (topology and KCP one minor behind, a topology two minors behind) in one stage,
all at once. Asserted (``benchmarks.bench_faults.calibrate_through_proxy``, the code the
benchmark runs at larger scale with a clean run beside it): the run completes, every cluster is
at the target, rolled out, untainted and schedulable; exactly one effective version write per
step counted at the proxy; no cluster observed mid-upgrade and untainted (sampled every second
while it runs); and every kind of fault was injected. The figures are printed for
docs/reliability/api-faults.md. The worker runs as the least-privilege ServiceAccount of
deploy/rbac; its bearer token passes through the proxy.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client
from kubernetes.dynamic import DynamicClient

from benchmarks.bench_faults import FaultReport, calibrate_through_proxy, layout_of
from orchestrator.kube import capi
from orchestrator.localplane.plane import LocalPlane
from testkit.capd_fleet import CREATE_TIMEOUT, provision, wait_available
from testkit.capi_waits import wait_for
from testkit.faultproxy import KINDS
from testkit.worker_rbac import WorkerIdentity, grant_kubeconfig_reader, grant_plan_store

pytestmark = [pytest.mark.integration, pytest.mark.slow]

NS = "calibrator-faults"
LAYOUT = layout_of(3)
RATE = 0.15
SEED = 11
REQUEST_TIMEOUT = 60  # seconds for one API call of the fixture: every wait is bounded


@pytest.fixture(scope="module")
def fault_fleet(dyn: DynamicClient, mgmt: client.ApiClient) -> Iterator[None]:
    provision(dyn, NS, LAYOUT)
    grant_kubeconfig_reader(mgmt, NS)
    grant_plan_store(mgmt, NS)
    clusters = dyn.resources.get(api_version=capi.CLUSTER[0], kind=capi.CLUSTER[1])
    try:
        yield
    finally:
        for name in LAYOUT:
            try:
                clusters.delete(name=name, namespace=NS, _request_timeout=REQUEST_TIMEOUT)
            except Exception as err:
                print(f"delete {NS}/{name}: {err}")
        wait_for(
            "fault clusters deleted",
            lambda: (
                not clusters.get(namespace=NS, _request_timeout=REQUEST_TIMEOUT).to_dict()["items"]
            ),
            300,
        )


# The bound catches a hang; it does not measure speed (benchmarks/bench_faults.py does).
@pytest.mark.timeout(1500)
def test_a_calibration_through_a_faulty_api_converges_with_one_write_per_step(
    plane: LocalPlane,
    fault_fleet: None,
    dyn: DynamicClient,
    worker_identity: WorkerIdentity,
    tmp_path: Path,
) -> None:
    created = wait_available(dyn, NS, LAYOUT, CREATE_TIMEOUT)
    print(f"{len(LAYOUT)} clusters Available after {created:.0f}s")
    report = asyncio.run(
        calibrate_through_proxy(
            plane_kubeconfig=plane.kubeconfig,
            token=worker_identity.token,
            namespace=NS,
            layout=LAYOUT,
            rate=RATE,
            seed=SEED,
            workdir=tmp_path,
            timeout=1200,
        )
    )
    print("\n" + FaultReport.header() + "\n" + report.row())
    print(f"retries in calls by cause: {report.client_retries}")
    assert report.converged == len(LAYOUT)
    assert report.duplicate_writes == 0 and not report.violations
    # Every kind was injected: the version writes' scripted faults (409, held answer, reset)
    # and, over hundreds of requests, the random draw.
    injected = report.proxy["faults"]
    assert set(injected) == set(KINDS), injected
    assert report.proxy["faults_total"] >= 0.05 * report.proxy["requests"], report.proxy
