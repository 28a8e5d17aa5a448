from __future__ import annotations

from orchestrator.domain.compatibility import check_fleet, cluster_findings
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
