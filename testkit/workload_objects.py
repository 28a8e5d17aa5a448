"""What the end-to-end runs put on and check on a workload cluster of real CAPD clusters.

The pause application (a Deployment of ``REPLICAS`` pods behind a PodDisruptionBudget of
``MIN_AVAILABLE``) that the kind fleet benchmark (benchmarks/bench_kind_fleet.py) places with
``calibrator place`` and the Docker end-to-end tests (tests/docker/) deploy, so that every
drain of an upgrade meets a budget; and the CoreDNS image a v1.35 upgrade leaves behind. One
place, so that the benchmark and the tests deploy and check the same thing.
"""

from __future__ import annotations

from kubernetes import client

APP, APP_NS, REPLICAS, MIN_AVAILABLE = "pause", "default", 2, 1
PAUSE_IMAGE = "registry.k8s.io/pause:3.10.1"  # in both node images; nothing can be pulled
COREDNS_TARGET_IMAGE = "registry.k8s.io/coredns/coredns:v1.13.1"  # kubeadm v1.35's CoreDNS


def app_objects() -> tuple[client.V1Deployment, client.V1PodDisruptionBudget]:
    """The pause Deployment and its PodDisruptionBudget, to create on a workload cluster."""
    labels = {"app": APP}
    container = client.V1Container(name=APP, image=PAUSE_IMAGE, image_pull_policy="Never")
    deployment = client.V1Deployment(
        metadata=client.V1ObjectMeta(name=APP, namespace=APP_NS),
        spec=client.V1DeploymentSpec(
            replicas=REPLICAS,
            selector=client.V1LabelSelector(match_labels=labels),
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(labels=labels),
                spec=client.V1PodSpec(containers=[container], termination_grace_period_seconds=5),
            ),
        ),
    )
    pdb = client.V1PodDisruptionBudget(
        metadata=client.V1ObjectMeta(name=APP, namespace=APP_NS),
        spec=client.V1PodDisruptionBudgetSpec(
            min_available=MIN_AVAILABLE, selector=client.V1LabelSelector(match_labels=labels)
        ),
    )
    return deployment, pdb
