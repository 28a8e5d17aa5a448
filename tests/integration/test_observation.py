"""Observing a workload cluster on a real kube-apiserver: deprecated APIs in use, and PDBs.

The local plane's own kube-apiserver (v1.35, serving the off-by-default
storage.k8s.io/v1beta1 through ``--runtime-config``, orchestrator/localplane/plane.py) plays the
workload cluster: a ``<cluster>-kubeconfig`` Secret in a namespace of this module points at it,
as CAPI's does at a real one. A VolumeAttributesClass is created through v1beta1 (deprecated in
1.34, removed in 1.37) by the real kubectl, and read back through it, so its apiserver counts
the requests, records the deprecated use in its metrics, and stores the object with kubectl's
managedFields entry and last-applied annotation at that version.

The plane runs no kube-controller-manager, so no disruption controller fills in PDB status:
this module writes ``status`` through the status subresource, as that controller would.
"""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
import yaml
from kubernetes import client

from orchestrator.domain.apis import ApiRef
from orchestrator.domain.observed import ApiUsage
from orchestrator.domain.observed_load import blockers_from_list, usages_from_list
from orchestrator.domain.snapshot import SnapshotError
from orchestrator.kube import apiusage, workload
from orchestrator.kube.bounded import Deadline
from orchestrator.localplane.plane import LocalPlane

pytestmark = pytest.mark.integration

NAMESPACE = "calibrator-observe"
CLUSTER = "self"
VAC = ApiRef("storage.k8s.io", "v1beta1", "VolumeAttributesClass")
VAC_NAME = "observe-gold"
READS = 5  # GETs through v1beta1 besides kubectl's own
MIRROR = "observe-kube-apiserver"

VAC_MANIFEST = f"""
apiVersion: storage.k8s.io/v1beta1
kind: VolumeAttributesClass
metadata:
  name: {VAC_NAME}
driverName: csi.example.com
parameters:
  iops: "3000"
"""


def pdb(name: str, max_unavailable: int) -> client.V1PodDisruptionBudget:
    return client.V1PodDisruptionBudget(
        metadata=client.V1ObjectMeta(name=name, namespace=NAMESPACE),
        spec=client.V1PodDisruptionBudgetSpec(
            max_unavailable=max_unavailable,
            selector=client.V1LabelSelector(match_labels={"app": name}),
        ),
    )


@pytest.fixture(scope="module")
def workload_cluster(plane: LocalPlane, mgmt: client.ApiClient) -> Iterator[str]:
    """The plane as a workload cluster: its kubeconfig Secret, a v1beta1 object, two PDBs.

    Yields the apiserver's ``host:port``.
    """
    core = client.CoreV1Api(mgmt)
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=NAMESPACE)))
    text = plane.kubeconfig.read_text()
    core.create_namespaced_secret(
        NAMESPACE,
        client.V1Secret(
            metadata=client.V1ObjectMeta(name=f"{CLUSTER}-kubeconfig"),
            string_data={"value": text},
        ),
    )
    applied = subprocess.run(
        ["kubectl", "--kubeconfig", str(plane.kubeconfig), "apply", "-f", "-"],
        input=VAC_MANIFEST,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert applied.returncode == 0, applied.stderr
    # The apiserver's deprecation warning, passed on by kubectl: the API really is deprecated.
    assert "deprecated" in applied.stderr and "1.37" in applied.stderr, applied.stderr
    custom = client.CustomObjectsApi(mgmt)
    for _ in range(READS):
        custom.get_cluster_custom_object(
            "storage.k8s.io", "v1beta1", "volumeattributesclasses", VAC_NAME
        )
    policy = client.PolicyV1Api(mgmt)
    for name, max_unavailable in (("frozen", 0), ("loose", 1)):
        policy.create_namespaced_pod_disruption_budget(NAMESPACE, pdb(name, max_unavailable))
        policy.patch_namespaced_pod_disruption_budget_status(
            name,
            NAMESPACE,
            {
                "status": {
                    "expectedPods": 2,
                    "currentHealthy": 2,
                    "desiredHealthy": 2 - max_unavailable,
                    "disruptionsAllowed": max_unavailable,
                    "observedGeneration": 1,
                }
            },
        )
    server = yaml.safe_load(text)["clusters"][0]["cluster"]["server"]
    yield str(server).removeprefix("https://")
    custom.delete_cluster_custom_object("storage.k8s.io", "v1", "volumeattributesclasses", VAC_NAME)
    core.delete_namespace(NAMESPACE)


def by_source(usage: tuple[ApiUsage, ...]) -> dict[str, ApiUsage]:
    return {u.source: u for u in usage if u.api == VAC}


def test_the_deprecated_api_in_use_and_the_blocking_pdb_are_seen(
    mgmt: client.ApiClient, workload_cluster: str
) -> None:
    now = datetime.now(UTC)
    started = time.monotonic()
    usage, blockers, partial = workload.observe_cluster(mgmt, NAMESPACE, CLUSTER, now, 30)
    print(f"\n[observe] one observe_cluster on the plane: {time.monotonic() - started:.3f}s")
    assert partial == ""  # no kube-apiserver pods: the kubeconfig's server is the one instance
    seen = by_source(usage)
    assert set(seen) == {"metric", "managedFields", "annotation"}, usage

    metric = seen["metric"]
    assert metric.resource == "volumeattributesclasses"
    assert metric.removed_release == "1.37"
    assert metric.requests is not None and metric.requests >= READS + 1  # ours and kubectl's
    assert metric.counters == ((workload_cluster, metric.requests),)
    assert metric.example == workload_cluster
    assert metric.first_seen == metric.last_seen == metric.observed_at == now.replace(microsecond=0)

    for source in ("managedFields", "annotation"):
        stored = seen[source]
        assert (stored.objects, stored.example, stored.removed_release) == (1, VAC_NAME, "1.37")
        assert stored.requests is None and stored.resource == "volumeattributesclasses"

    mine = [b for b in blockers if b.namespace == NAMESPACE]
    assert [(b.name, b.reason, b.expected_pods) for b in mine] == [
        ("frozen", "maxUnavailable is 0", 2)
    ]


def test_the_probe_carries_the_observation(mgmt: client.ApiClient, workload_cluster: str) -> None:
    status = workload.probe(mgmt, NAMESPACE, CLUSTER)
    assert status.reachable, status.reason
    assert "storage.k8s.io/v1beta1" in status.api_versions
    assert status.observation_partial == ""
    assert set(by_source(status.api_usage)) == {"metric", "managedFields", "annotation"}
    assert [b.name for b in status.disruption_blockers if b.namespace == NAMESPACE] == ["frozen"]
    # Deprecated without a removal (v1 Endpoints, which the apiserver itself reads): no upgrade
    # removes it, so it is not recorded.
    assert all(u.removed_release for u in status.api_usage)
    # What the live read saw is what the FleetSnapshot format writes and reads back, unchanged.
    doc = status.to_json()
    assert usages_from_list(doc["apiUsage"], "apiUsage", SnapshotError) == status.api_usage
    blockers = blockers_from_list(doc["disruptionBlockers"], "disruptionBlockers", SnapshotError)
    assert blockers == status.disruption_blockers


def test_the_metrics_body_is_streamed(plane: LocalPlane, workload_cluster: str) -> None:
    kubeconfig = yaml.safe_load(plane.kubeconfig.read_text())
    started, cpu = time.monotonic(), time.process_time()
    read = apiusage.instance_metrics(kubeconfig, workload_cluster, Deadline(30))
    took, cpu = time.monotonic() - started, time.process_time() - cpu
    print(
        f"\n[observe] /metrics: {read.text_bytes:,} bytes ({read.wire_bytes:,} on the wire), "
        f"{read.requests.lines:,} lines in {took:.3f}s, {cpu:.3f}s of our CPU"
    )
    assert read.text_bytes > 100_000 and read.requests.malformed == 0
    assert 0 < read.wire_bytes < read.text_bytes  # the apiserver compressed it
    assert any(u.resource.resource == "volumeattributesclasses" for u in read.requests.uses)


@pytest.fixture
def instances(mgmt: client.ApiClient, workload_cluster: str) -> Iterator[tuple[str, str]]:
    """Two kube-apiserver pods in kube-system as kubeadm's mirror pods name them.

    One advertises the real apiserver, one a local port nobody listens on (a control-plane
    machine that is down). Only their metadata matters: no kubelet runs them.
    """
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{sock.getsockname()[1]}"
        core = client.CoreV1Api(mgmt)
        names = []
        for i, endpoint in enumerate((workload_cluster, dead)):
            name = f"{MIRROR}-{i}"
            core.create_namespaced_pod(
                "kube-system",
                client.V1Pod(
                    metadata=client.V1ObjectMeta(
                        name=name,
                        labels={"component": "kube-apiserver", "tier": "control-plane"},
                        annotations={apiusage.ADVERTISE_ANNOTATION: endpoint},
                    ),
                    spec=client.V1PodSpec(
                        containers=[client.V1Container(name="kube-apiserver", image="unused")]
                    ),
                ),
            )
            names.append(name)
        yield workload_cluster, dead
        for name in names:
            core.delete_namespaced_pod(name, "kube-system", grace_period_seconds=0)


def test_every_control_plane_instance_is_asked_and_a_silent_one_is_named(
    mgmt: client.ApiClient, instances: tuple[str, str]
) -> None:
    live, dead = instances
    usage, _, partial = workload.observe_cluster(mgmt, NAMESPACE, CLUSTER, datetime.now(UTC), 30)
    assert partial.startswith(f"apiserver {dead}: GET /metrics: "), partial
    assert "refused" in partial, partial
    metric = by_source(usage)["metric"]
    assert [instance for instance, _ in metric.counters] == [live]


def test_an_unreachable_cluster_is_a_clear_error(mgmt: client.ApiClient) -> None:
    with pytest.raises(
        workload.WorkloadUnreachable,
        match="no kubeconfig: Secret calibrator-observe/gone-kubeconfig not found",
    ):
        workload.observe_cluster(mgmt, NAMESPACE, "gone", datetime.now(UTC), 10)
