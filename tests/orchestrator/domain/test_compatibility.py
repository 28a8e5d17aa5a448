from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from orchestrator.domain.apis import ApiRef
from orchestrator.domain.compatibility import (
    check_fleet,
    cluster_findings,
    disruption_findings,
    observed_findings,
)
from orchestrator.domain.observed import ApiUsage, DisruptionBlocker
from orchestrator.domain.snapshot import Cluster, ControlPlaneState, WorkloadClusterStatus
from orchestrator.domain.snapshot_load import snapshot_from_mapping
from orchestrator.domain.versions import KubeVersion

V = KubeVersion.parse

SNAP = snapshot_from_mapping(
    {
        "availableVersions": ["v1.24.0", "v1.25.0", "v1.26.0"],
        "clusters": [
            {"name": "old", "controlPlane": {"version": "v1.24.0"}},
            {"name": "new", "controlPlane": {"version": "v1.26.0"}},
        ],
        "workloads": [
            {
                "name": "cron",
                "apis": [
                    "batch/v1beta1/CronJob",
                    "autoscaling/v2beta2/HorizontalPodAutoscaler",
                    "apps/v1/Deployment",
                ],
                "placement": {"clusters": ["old", "new"]},
            },
            {"name": "fine", "apis": ["batch/v1/CronJob"], "placement": {"clusters": ["old"]}},
        ],
    }
)


def test_first_breaking_version_per_api() -> None:
    findings = cluster_findings(
        SNAP.cluster("old"), [V("v1.25.0"), V("v1.26.0")], SNAP.workloads[:1]
    )
    assert [(f.api, str(f.version), f.replacement, f.already_broken) for f in findings] == [
        ("batch/v1beta1/CronJob", "v1.25.0", "batch/v1/CronJob", False),
        (
            "autoscaling/v2beta2/HorizontalPodAutoscaler",
            "v1.26.0",
            "autoscaling/v2/HorizontalPodAutoscaler",
            False,
        ),
    ]
    assert (
        findings[0].describe()
        == "default/cron uses batch/v1beta1/CronJob, removed in 1.25; use batch/v1/CronJob"
    )


def test_fleet_check_covers_current_versions_and_marks_already_broken() -> None:
    findings = check_fleet(SNAP, {"old": [V("v1.25.0")]})
    by_cluster = {(f.cluster, f.api): f for f in findings}
    assert ("old", "batch/v1beta1/CronJob") in by_cluster
    assert (
        "old",
        "autoscaling/v2beta2/HorizontalPodAutoscaler",
    ) not in by_cluster  # still served at 1.25
    assert by_cluster[("new", "batch/v1beta1/CronJob")].already_broken
    assert all(f.workload != "default/fine" for f in findings)


# --- Observed usage and disruption blockers (issue 27) ---------------------------------------

T0 = datetime(2026, 12, 5, 10, 2, tzinfo=UTC)
T1 = datetime(2026, 12, 5, 11, 0, tzinfo=UTC)


def usage(api: str, source: str = "metric", *, quiet: bool = False, **kw: object) -> ApiUsage:
    ref = ApiRef.parse(api)
    return ApiUsage(
        api=ref,
        resource=ref.kind.lower() + "s",
        source=source,  # type: ignore[arg-type]
        removed_release=str(kw.pop("release", "1.35")),
        first_seen=T0,
        last_seen=T0 if quiet else T1,
        observed_at=T1,
        requests=1204 if source == "metric" else None,
        objects=0 if source == "metric" else 2,
        **kw,  # type: ignore[arg-type]
    )


def seen(version: str, *usages: ApiUsage, blockers: tuple[DisruptionBlocker, ...] = ()) -> Cluster:
    return Cluster(
        "a",
        ControlPlaneState(V(version)),
        workload_cluster=WorkloadClusterStatus(
            True, api_usage=usages, disruption_blockers=blockers
        ),
    )


VAC_ALPHA = "storage.k8s.io/v1alpha1/VolumeAttributesClass"  # removed in 1.35
VAC_BETA = "storage.k8s.io/v1beta1/VolumeAttributesClass"  # removed in 1.37


@pytest.mark.parametrize(
    ("name", "cluster", "versions", "expected"),
    [
        (
            "removed on the path: breaks at the first version without it",
            seen("v1.34.0", usage(VAC_ALPHA)),
            ["v1.35.0", "v1.36.0"],
            ("v1.35.0", "1.35", False, False, True),
        ),
        (
            "quiet usage: still a finding, inactive",
            seen("v1.34.0", usage(VAC_ALPHA, quiet=True)),
            ["v1.35.0"],
            ("v1.35.0", "1.35", False, False, False),
        ),
        (
            "removal after the path: early warning at the last version with the catalog's release",
            seen("v1.34.0", usage(VAC_BETA, release="1.37")),
            ["v1.35.0", "v1.36.0"],
            ("v1.36.0", "1.37", False, True, True),
        ),
        (
            "already gone at the current version",
            seen("v1.35.0", usage(VAC_ALPHA, "managedFields")),
            ["v1.36.0"],
            ("v1.36.0", "1.35", True, False, True),
        ),
        (
            "no path: the current version is checked",
            seen("v1.34.0", usage(VAC_ALPHA)),
            [],
            ("v1.34.0", "1.35", False, True, True),
        ),
        (
            "the catalog decides removal, not the apiserver's label",
            seen("v1.34.0", usage("widgets.example.com/v1beta1/Widget", release="1.35")),
            ["v1.35.0"],
            ("v1.35.0", "1.35", False, True, True),
        ),
    ],
)
def test_observed_usage_is_matched_to_the_catalog(
    name: str, cluster: Cluster, versions: list[str], expected: tuple[object, ...]
) -> None:
    (finding,) = observed_findings(cluster, [V(v) for v in versions])
    assert (
        str(finding.version),
        finding.removed_in,
        finding.already_broken,
        finding.early_warning,
        finding.active,
    ) == expected, name
    assert finding.workload == "" and finding.observed


def test_an_observed_finding_describes_what_was_seen_and_names_the_source() -> None:
    (metric, stored) = observed_findings(
        seen("v1.34.0", usage(VAC_ALPHA), usage(VAC_ALPHA, "managedFields", example="ns/gold")),
        [V("v1.35.0")],
    )
    assert metric.source == "metric" and stored.source == "managedFields"
    assert metric.describe() == (
        "observed: 1,204 requests to storage.k8s.io/v1alpha1 volumeattributesclasss since "
        "2026-12-05 10:02 UTC (apiserver metrics); "
        "storage.k8s.io/v1alpha1/VolumeAttributesClass removed in 1.35; "
        "use storage.k8s.io/v1/VolumeAttributesClass"
    )
    assert metric.label == f"{VAC_ALPHA} (apiserver metrics)"
    assert stored.subject == "ns/gold"
    assert "(managedFields of stored objects)" in stored.describe()
    (early,) = observed_findings(seen("v1.34.0", usage(VAC_BETA)), [V("v1.35.0")])
    assert early.describe().endswith(
        f"; {VAC_BETA} is deprecated, removed in 1.37; use "
        + ("storage.k8s.io/v1/VolumeAttributesClass")
    )
    (unknown,) = observed_findings(
        seen("v1.34.0", usage("widgets.example.com/v1beta1/Widget")), [V("v1.35.0")]
    )
    assert "; not in the API catalog;" in unknown.describe()


def test_a_cluster_not_observed_has_no_observed_findings() -> None:
    bare = Cluster("a", ControlPlaneState(V("v1.34.0")))
    assert observed_findings(bare, [V("v1.35.0")]) == []
    assert disruption_findings(bare, [V("v1.35.0")]) == []


PDB = DisruptionBlocker("shop", "web", "maxUnavailable is 0", 2)


@pytest.mark.parametrize(
    ("worker_steps", "expected"),
    [([], []), (["v1.35.0"], [("pdb", "shop/web", "v1.35.0")])],
)
def test_an_unsatisfiable_pdb_is_a_finding_only_where_workers_roll(
    worker_steps: list[str], expected: list[tuple[str, str, str]]
) -> None:
    found = disruption_findings(seen("v1.34.0", blockers=(PDB,)), [V(v) for v in worker_steps])
    assert [(f.source, f.subject, str(f.version)) for f in found] == expected
    for f in found:
        assert f.label == "PodDisruptionBudget shop/web"
        assert f.describe() == (
            "PodDisruptionBudget shop/web allows no eviction (maxUnavailable is 0): "
            "a node drain would never finish"
        )


def test_fleet_check_orders_declared_observed_then_pdb_per_cluster() -> None:
    cluster = seen("v1.24.0", usage("batch/v1beta1/CronJob", release="1.25"), blockers=(PDB,))
    snap = replace(
        SNAP, clusters=(replace(SNAP.cluster("old"), workload_cluster=cluster.workload_cluster),)
    )
    found = check_fleet(snap, {"old": [V("v1.25.0")]}, {"old": [V("v1.25.0")]})
    assert [f.source for f in found] == ["declared", "metric", "pdb"]
    assert check_fleet(snap, {"old": [V("v1.25.0")]})[-1].source == "metric"
