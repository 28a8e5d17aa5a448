from __future__ import annotations

import pytest

from orchestrator.domain.apicatalog import (
    catalog,
    deprecated_apis,
    is_served,
    lifecycle,
    removed_apis,
)
from orchestrator.domain.apis import ApiRef
from orchestrator.domain.versions import KubeVersion

V = KubeVersion.parse
A = ApiRef.parse


@pytest.mark.parametrize(
    ("api", "deprecated_in", "removed_in", "replacement"),
    [
        ("extensions/v1beta1/Deployment", "1.9", "1.16", "apps/v1/Deployment"),
        ("apps/v1beta2/StatefulSet", "1.9", "1.16", "apps/v1/StatefulSet"),
        ("extensions/v1beta1/NetworkPolicy", "1.9", "1.16", "networking.k8s.io/v1/NetworkPolicy"),
        ("extensions/v1beta1/Ingress", "1.14", "1.22", "networking.k8s.io/v1/Ingress"),
        (
            "rbac.authorization.k8s.io/v1beta1/ClusterRole",
            "1.17",
            "1.22",
            "rbac.authorization.k8s.io/v1/ClusterRole",
        ),
        (
            "apiextensions.k8s.io/v1beta1/CustomResourceDefinition",
            "1.16",
            "1.22",
            "apiextensions.k8s.io/v1/CustomResourceDefinition",
        ),
        # Alpha removals peers list (kubernetes#104248, CHANGELOG-1.23).
        (
            "rbac.authorization.k8s.io/v1alpha1/Role",
            "1.17",
            "1.23",
            "rbac.authorization.k8s.io/v1/Role",
        ),
        (
            "rbac.authorization.k8s.io/v1alpha1/ClusterRoleBinding",
            "1.17",
            "1.23",
            "rbac.authorization.k8s.io/v1/ClusterRoleBinding",
        ),
        (
            "scheduling.k8s.io/v1alpha1/PriorityClass",
            "1.14",
            "1.23",
            "scheduling.k8s.io/v1/PriorityClass",
        ),
        ("batch/v1beta1/CronJob", "1.21", "1.25", "batch/v1/CronJob"),
        ("policy/v1beta1/PodSecurityPolicy", "1.21", "1.25", ""),
        (
            "autoscaling/v2beta2/HorizontalPodAutoscaler",
            "1.23",
            "1.26",
            "autoscaling/v2/HorizontalPodAutoscaler",
        ),
        (
            "storage.k8s.io/v1beta1/CSIStorageCapacity",
            "1.24",
            "1.27",
            "storage.k8s.io/v1/CSIStorageCapacity",
        ),
        (
            "flowcontrol.apiserver.k8s.io/v1beta2/FlowSchema",
            "1.26",
            "1.29",
            "flowcontrol.apiserver.k8s.io/v1/FlowSchema",
        ),
        (
            "flowcontrol.apiserver.k8s.io/v1beta3/PriorityLevelConfiguration",
            "1.29",
            "1.32",
            "flowcontrol.apiserver.k8s.io/v1/PriorityLevelConfiguration",
        ),
        (
            "admissionregistration.k8s.io/v1alpha1/ValidatingAdmissionPolicy",
            "1.29",
            "1.32",
            "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy",
        ),
        (
            "admissionregistration.k8s.io/v1beta1/ValidatingAdmissionPolicyBinding",
            "1.31",
            "1.34",
            "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicyBinding",
        ),
        (
            "resource.k8s.io/v1alpha3/ResourceClaim",
            "1.32",
            "1.34",
            "resource.k8s.io/v1/ResourceClaim",
        ),
        (
            "storage.k8s.io/v1alpha1/VolumeAttributesClass",
            "1.31",
            "1.35",
            "storage.k8s.io/v1/VolumeAttributesClass",
        ),
        (
            "storagemigration.k8s.io/v1alpha1/StorageVersionMigration",
            "1.33",
            "1.35",
            "storagemigration.k8s.io/v1/StorageVersionMigration",
        ),
        # Kubernetes 1.36.
        (
            "scheduling.k8s.io/v1alpha1/Workload",
            "1.35",
            "1.36",
            "scheduling.k8s.io/v1beta1/Workload",
        ),
        # Kubernetes 1.37.
        (
            "scheduling.k8s.io/v1alpha2/PodGroup",
            "1.36",
            "1.37",
            "scheduling.k8s.io/v1beta1/PodGroup",
        ),
        ("networking.k8s.io/v1beta1/IPAddress", "1.34", "1.37", "networking.k8s.io/v1/IPAddress"),
        (
            "networking.k8s.io/v1beta1/ServiceCIDR",
            "1.34",
            "1.37",
            "networking.k8s.io/v1/ServiceCIDR",
        ),
        (
            "storage.k8s.io/v1beta1/VolumeAttributesClass",
            "1.34",
            "1.37",
            "storage.k8s.io/v1/VolumeAttributesClass",
        ),
        (
            "certificates.k8s.io/v1alpha1/ClusterTrustBundle",
            "1.34",
            "1.37",
            "certificates.k8s.io/v1/ClusterTrustBundle",
        ),
        # Planned (upstream lifecycle tag), after the newest released minor.
        ("resource.k8s.io/v1beta1/DeviceClass", "1.35", "1.38", "resource.k8s.io/v1/DeviceClass"),
    ],
)
def test_catalog_rows(api: str, deprecated_in: str, removed_in: str, replacement: str) -> None:
    record = lifecycle(A(api))
    assert record is not None
    assert record.deprecated_in_text == deprecated_in
    assert record.removed_in_text == removed_in
    assert record.replacement_api == replacement


def test_every_reference_removal_is_present() -> None:
    assert len(catalog()) >= 76
    for record in catalog().values():
        assert record.deprecated_in < record.removed_in


@pytest.mark.parametrize(
    ("api", "version", "served"),
    [
        ("batch/v1beta1/CronJob", "v1.24.17", True),
        ("batch/v1beta1/CronJob", "v1.25.0-alpha.1", False),
        ("batch/v1/CronJob", "v1.35.0", True),
        ("rbac.authorization.k8s.io/v1alpha1/Role", "v1.22.17", True),
        ("rbac.authorization.k8s.io/v1alpha1/Role", "v1.23.0", False),
        ("resource.k8s.io/v1beta1/ResourceClaim", "v1.37.2", True),
        ("resource.k8s.io/v1beta1/ResourceClaim", "v1.38.0-alpha.0", False),
        ("networking.k8s.io/v1beta1/ServiceCIDR", "v1.36.6", True),
        ("networking.k8s.io/v1beta1/ServiceCIDR", "v1.37.0", False),
        ("scheduling.k8s.io/v1beta1/Workload", "v1.37.0", True),
        ("v1/ConfigMap", "v1.35.0", True),
        ("example.com/v1/Widget", "v1.35.0", True),
    ],
)
def test_is_served(api: str, version: str, served: bool) -> None:
    assert is_served(A(api), V(version)) is served


def test_query_which_apis_are_gone() -> None:
    apis = [
        A("apps/v1/Deployment"),
        A("batch/v1beta1/CronJob"),
        A("policy/v1beta1/PodDisruptionBudget"),
    ]
    assert [str(r.api) for r in removed_apis(apis, V("v1.25.0"))] == [
        "batch/v1beta1/CronJob",
        "policy/v1beta1/PodDisruptionBudget",
    ]
    assert removed_apis(apis, V("v1.24.0")) == []
    assert [str(r.api) for r in deprecated_apis(apis, V("v1.24.0"))] == [
        "batch/v1beta1/CronJob",
        "policy/v1beta1/PodDisruptionBudget",
    ]


@pytest.mark.parametrize("bad", ["CronJob", "batch//CronJob", "a/b/c/d", 3])
def test_api_ref_parse_rejects(bad: object) -> None:
    with pytest.raises(ValueError, match="invalid API"):
        ApiRef.parse(bad)


def test_api_ref_core_group() -> None:
    assert A("v1/Pod") == ApiRef("", "v1", "Pod")
    assert str(A("v1/Pod")) == "v1/Pod"
