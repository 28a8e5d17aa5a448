from __future__ import annotations

import pytest

from orchestrator.placement import place
from orchestrator.placement.plugins.api_compatibility import ApiCompatibility
from tests.orchestrator.placement.fleet import cluster, fleet, single, workload

PLUGIN = ApiCompatibility()


@pytest.mark.parametrize(
    ("version", "apis", "reasons"),
    [
        ("v1.24.9", ["batch/v1beta1/CronJob"], ()),
        (
            "v1.25.3",
            ["batch/v1beta1/CronJob", "apps/v1/Deployment"],
            (
                "v1.25.3 no longer serves batch/v1beta1/CronJob "
                "(removed in 1.25; use batch/v1/CronJob)",
            ),
        ),
        (
            "v1.25.0",
            ["policy/v1beta1/PodSecurityPolicy"],
            (
                "v1.25.0 no longer serves policy/v1beta1/PodSecurityPolicy "
                "(removed in 1.25; no replacement)",
            ),
        ),
        ("v1.35.0", ["example.com/v1alpha1/Widget", "apps/v1/Deployment"], ()),
        (
            "v1.35.0",
            [
                "resource.k8s.io/v1alpha3/ResourceClaim",
                "storage.k8s.io/v1alpha1/VolumeAttributesClass",
            ],
            (
                "v1.35.0 no longer serves resource.k8s.io/v1alpha3/ResourceClaim "
                "(removed in 1.34; use resource.k8s.io/v1/ResourceClaim)",
                "v1.35.0 no longer serves storage.k8s.io/v1alpha1/VolumeAttributesClass "
                "(removed in 1.35; use storage.k8s.io/v1/VolumeAttributesClass)",
            ),
        ),
    ],
)
def test_filter(version: str, apis: list[str], reasons: tuple[str, ...]) -> None:
    ctx, w, c = single(cluster("c1", version=version), workload("w", apis=apis))
    assert PLUGIN.filter(ctx, w, c).reasons == reasons


def test_workloads_differing_only_in_unremovable_apis_share_a_key() -> None:
    _, a, _ = single(
        cluster("c1"), workload("a", apis=["apps/v1/Deployment", "batch/v1beta1/CronJob"])
    )
    _, b, _ = single(cluster("c1"), workload("b", apis=["v1/Service", "batch/v1beta1/CronJob"]))
    assert PLUGIN.workload_key(a) == PLUGIN.workload_key(b)


def test_api_removal_evicts_and_moves_the_workload() -> None:
    snapshot = fleet(
        [cluster("new", version="v1.35.0"), cluster("old", version="v1.33.5")],
        [workload("w", apis=["resource.k8s.io/v1alpha3/ResourceClaim"], clusters=["new"])],
    )
    decision = place(snapshot).decision("default/w")
    assert decision.replicas == {"old": 1}
    assert decision.evicted == ("new",)
    assert "no longer serves resource.k8s.io/v1alpha3/ResourceClaim" in decision.reasons["new"][0]
