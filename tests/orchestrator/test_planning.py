"""Planning glue: compatibility findings decide between moving a workload and blocking a cluster."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from orchestrator.domain.errors import InputError
from orchestrator.domain.selectors import parse_selector_string
from orchestrator.domain.snapshot import FleetSnapshot
from orchestrator.domain.snapshot_load import snapshot_from_mapping
from orchestrator.domain.versions import KubeVersion
from orchestrator.domain.waves import DEFAULT_STRATEGY, strategy_from_mapping
from orchestrator.planning import findings_to_json, plan_calibration, plan_to_json

V = KubeVersion.parse


def fleet(workload_clusters: list[str], affinity: dict[str, Any] | None = None) -> FleetSnapshot:
    return snapshot_from_mapping(
        {
            "availableVersions": ["v1.31.1", "v1.32.0", "v1.33.1"],
            "clusters": [
                {
                    "name": "a",
                    "labels": {"env": "prod", "calibrate": "yes"},
                    "controlPlane": {"version": "v1.31.1"},
                    "machineDeployments": [{"name": "md-0", "version": "v1.31.1"}],
                },
                {
                    "name": "b",
                    "labels": {"env": "prod"},
                    "controlPlane": {"version": "v1.31.1"},
                    "machineDeployments": [{"name": "md-0", "version": "v1.31.1"}],
                },
                {
                    "name": "c",
                    "labels": {"env": "dev", "calibrate": "yes"},
                    "controlPlane": {"version": "v1.32.0"},
                },
            ],
            "workloads": [
                {
                    "name": "tuner",
                    "apis": ["flowcontrol.apiserver.k8s.io/v1beta3/FlowSchema"],
                    "placement": {
                        "clusters": workload_clusters,
                        "clusterAffinity": affinity or {"matchLabels": {"env": "prod"}},
                        "maxClusters": 1,
                    },
                }
            ],
        }
    )


def test_blocks_when_no_cluster_can_take_the_workload_after_calibration() -> None:
    plan = plan_calibration(fleet(["a"]), V("v1.33.1"))
    a = plan.plan_for("a")
    assert a.blocked
    assert (
        "step to v1.32.0 would break default/tuner uses flowcontrol.apiserver.k8s.io/v1beta3/FlowSchema"
        in a.reasons[0]
    )
    assert not plan.plan_for("b").blocked
    assert "a" not in [n for w in plan.rollout.waves() for n in w]
    assert [v.action for v in plan.findings] == ["block"]


def test_moves_when_a_cluster_outside_the_calibration_still_serves_the_api() -> None:
    plan = plan_calibration(
        fleet(["a"]), V("v1.33.1"), selector=parse_selector_string("calibrate=yes")
    )
    assert not plan.plan_for("a").blocked
    verdict = plan.findings[0]
    assert (verdict.action, verdict.destination) == ("move", "b")
    doc = findings_to_json(plan)
    assert doc["findings"][0]["action"] == "move"  # type: ignore[index]


def test_already_broken_workloads_never_block() -> None:
    plan = plan_calibration(fleet(["c"], {"matchLabels": {"env": "dev"}}), V("v1.33.1"))
    assert not plan.plan_for("c").blocked
    assert [v.action for v in plan.findings] == ["none"]


def test_selector_that_matches_nothing_is_bad_input() -> None:
    with pytest.raises(InputError, match="matches no cluster"):
        plan_calibration(fleet(["a"]), V("v1.33.1"), selector=parse_selector_string("env=qa"))


def test_plan_json_contains_execution_order() -> None:
    doc = plan_to_json(
        plan_calibration(
            fleet(["b"]), V("v1.33.1"), selector=parse_selector_string("calibrate=yes")
        )
    )
    a = next(c for c in doc["clusters"] if c["name"] == "a")  # type: ignore[attr-defined]
    assert [o["component"] for o in a["order"]] == ["controlPlane", "controlPlane", "workers"]


def test_clusters_without_a_plan_are_unchecked_not_clean() -> None:
    # Minor 1.32 missing from the list: `a` and `b` cannot be planned to v1.33.1, `c` can.
    snap = fleet(["a"])
    gap = snapshot_from_mapping(
        {
            "availableVersions": ["v1.31.1", "v1.33.1"],
            "clusters": [
                {"name": c.name, "controlPlane": {"version": str(c.control_plane.version)}}
                for c in snap.clusters
            ],
        }
    )
    plan = plan_calibration(gap, V("v1.33.1"))
    assert plan.unchecked == ("a", "b")
    assert plan.left_behind() == ("a", "b")
    doc = findings_to_json(plan)
    assert doc["complete"] is False
    assert [u["cluster"] for u in doc["unchecked"]] == ["a", "b"]  # type: ignore[attr-defined]
    assert plan_to_json(plan)["complete"] is False


def test_a_cluster_blocked_by_a_finding_was_checked() -> None:
    # The finding is the answer for `a`: it was checked, and the block is reported as a finding.
    plan = plan_calibration(fleet(["a"]), V("v1.33.1"))
    assert plan.plan_for("a").blocked and plan.unchecked == ()
    assert findings_to_json(plan)["complete"] is True
    assert plan.left_behind() == ("a",)


def test_the_strategy_opts_in_to_prerelease_steps() -> None:
    snap = snapshot_from_mapping(
        {
            "availableVersions": ["v1.33.5", "v1.34.2", "v1.34.3-rc.0", "v1.35.0"],
            "clusters": [{"name": "a", "controlPlane": {"version": "v1.33.5"}}],
        }
    )
    ga = plan_calibration(snap, V("v1.35.0")).plan_for("a")
    assert [str(v) for v in ga.control_plane_steps] == ["v1.34.2", "v1.35.0"]
    opted = plan_calibration(
        snap, V("v1.35.0"), replace(DEFAULT_STRATEGY, allow_prereleases=True)
    ).plan_for("a")
    assert [str(v) for v in opted.control_plane_steps] == ["v1.34.3-rc.0", "v1.35.0"]


@pytest.mark.parametrize(
    ("selector", "scope", "planned"),
    [
        (None, {"b"}, ["b"]),
        (None, {"b", "c", "deleted"}, ["b", "c"]),
        ("calibrate=yes", {"a", "b"}, ["a"]),  # scope and selector both apply
        (None, None, ["a", "b", "c"]),
    ],
)
def test_a_scope_narrows_the_calibration_to_named_clusters(
    selector: str | None, scope: set[str] | None, planned: list[str]
) -> None:
    sel = parse_selector_string(selector) if selector else None
    plan = plan_calibration(
        fleet(["b"]), V("v1.33.1"), selector=sel, scope=None if scope is None else frozenset(scope)
    )
    assert [p.cluster for p in plan.clusters] == planned


def test_a_scope_with_no_cluster_left_is_bad_input() -> None:
    with pytest.raises(InputError, match="none of the 1 scoped cluster"):
        plan_calibration(fleet(["b"]), V("v1.33.1"), scope=frozenset({"deleted"}))


# --- Observed usage and disruption blockers (issue 27) ---------------------------------------

VAC_ALPHA = "storage.k8s.io/v1alpha1/VolumeAttributesClass"  # removed in 1.35
VAC_BETA = "storage.k8s.io/v1beta1/VolumeAttributesClass"  # removed in 1.37


def metric(api: str, *, quiet: bool = False, release: str = "1.35") -> dict[str, Any]:
    return {
        "api": api,
        "resource": "volumeattributesclasses",
        "source": "metric",
        "removedRelease": release,
        "requests": 1204,
        "firstSeen": "2026-12-05T10:02:00Z",
        "lastSeen": "2026-12-05T10:30:00Z" if quiet else "2026-12-05T11:00:00Z",
        "observedAt": "2026-12-05T11:00:00Z",
    }


PDB = {"namespace": "shop", "name": "web", "reason": "maxUnavailable is 0", "expectedPods": 2}


def observed_fleet(
    observed: dict[str, Any], *, workers: bool = True, version: str = "v1.34.0"
) -> FleetSnapshot:
    """One cluster `a` at ``version`` with what it was seen doing, beside a clean `b`."""

    def cluster(name: str, seen: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": name,
            "controlPlane": {"version": version},
            "workloadCluster": {"reachable": True, **seen},
        }
        if workers:
            out["machineDeployments"] = [{"name": "md-0", "version": version}]
        return out

    return snapshot_from_mapping(
        {
            "availableVersions": ["v1.34.0", "v1.35.0"],
            "clusters": [cluster("a", observed), cluster("b", {})],
        }
    )


@pytest.mark.parametrize(
    ("name", "observed", "strategy", "action", "blocked"),
    [
        (
            "an active usage of an API the path removes blocks",
            {"apiUsage": [metric(VAC_ALPHA)]},
            {},
            "block",
            True,
        ),
        (
            "the strategy turns it into a warning",
            {"apiUsage": [metric(VAC_ALPHA)]},
            {"observedUsage": "warn"},
            "warn",
            False,
        ),
        ("a quiet usage warns", {"apiUsage": [metric(VAC_ALPHA, quiet=True)]}, {}, "warn", False),
        (
            "a removal after the target warns early",
            {"apiUsage": [metric(VAC_BETA, release="1.37")]},
            {},
            "warn",
            False,
        ),
        (
            "an unsatisfiable PDB blocks a worker rollout",
            {"disruptionBlockers": [PDB]},
            {},
            "block",
            True,
        ),
        (
            "the strategy turns a PDB into a warning",
            {"disruptionBlockers": [PDB]},
            {"unsatisfiableDisruptionBudgets": "warn"},
            "warn",
            False,
        ),
    ],
)
def test_observed_findings_block_or_warn(
    name: str, observed: dict[str, Any], strategy: dict[str, Any], action: str, blocked: bool
) -> None:
    chosen = strategy_from_mapping({"stages": [{"name": "all"}], **strategy})
    plan = plan_calibration(observed_fleet(observed), V("v1.35.0"), chosen)
    assert [(v.finding.cluster, v.action) for v in plan.findings] == [("a", action)], name
    assert plan.plan_for("a").blocked is blocked
    assert not plan.plan_for("b").blocked
    assert plan.finding_actions() == {action: 1}
    waves = [n for w in plan.rollout.waves() for n in w]
    assert ("a" in waves) is not blocked and "b" in waves


def test_blocked_reasons_name_the_source() -> None:
    plan = plan_calibration(
        observed_fleet({"apiUsage": [metric(VAC_ALPHA)], "disruptionBlockers": [PDB]}),
        V("v1.35.0"),
    )
    assert plan.plan_for("a").reasons == (
        "step to v1.35.0 would break a client still using it: observed: 1,204 requests to "
        "storage.k8s.io/v1alpha1 volumeattributesclasses since 2026-12-05 10:02 UTC (apiserver "
        f"metrics); {VAC_ALPHA} removed in 1.35; use storage.k8s.io/v1/VolumeAttributesClass",
        "worker rollout to v1.35.0 blocked: PodDisruptionBudget shop/web allows no eviction "
        "(maxUnavailable is 0): a node drain would never finish",
    )


def test_a_pdb_blocks_only_a_cluster_whose_workers_roll() -> None:
    plan = plan_calibration(
        observed_fleet({"disruptionBlockers": [PDB]}, workers=False), V("v1.35.0")
    )
    assert plan.findings == () and not plan.plan_for("a").blocked
    at_target = plan_calibration(
        observed_fleet({"disruptionBlockers": [PDB]}, version="v1.35.0"), V("v1.35.0")
    )
    assert at_target.findings == () and not at_target.plan_for("a").needs_upgrade


def test_an_early_warning_carries_its_removal_release() -> None:
    plan = plan_calibration(
        observed_fleet({"apiUsage": [metric(VAC_BETA, release="1.37")]}), V("v1.35.0")
    )
    doc = findings_to_json(plan)
    findings: list[dict[str, Any]] = doc["findings"]  # type: ignore[assignment]
    (finding,) = findings
    assert finding["action"] == "warn" and finding["earlyWarning"] is True
    assert (finding["removedIn"], finding["version"]) == ("1.37", "v1.35.0")
    assert finding["source"] == "metric" and finding["workload"] == ""
    assert "removed in 1.37" in finding["detail"]
    assert doc["complete"] is True


def test_an_observed_api_already_gone_changes_nothing() -> None:
    plan = plan_calibration(
        observed_fleet({"apiUsage": [metric(VAC_ALPHA)]}, version="v1.35.0"), V("v1.35.0")
    )
    assert [v.action for v in plan.findings] == ["none"]


def test_a_partial_observation_makes_check_partial_never_clean() -> None:
    plan = plan_calibration(
        observed_fleet({"observationPartial": "apiserver 10.0.0.6:6443 did not answer"}),
        V("v1.35.0"),
    )
    assert plan.partially_observed == (("a", "apiserver 10.0.0.6:6443 did not answer"),)
    doc = findings_to_json(plan)
    assert doc["complete"] is False
    assert doc["partiallyObserved"] == [
        {"cluster": "a", "reason": "apiserver 10.0.0.6:6443 did not answer"}
    ]
    # The plan itself is whole: the step goes on; only the check's answer is partial.
    assert not plan.left_behind()


def test_declared_findings_keep_their_json_and_gain_only_additive_fields() -> None:
    doc = findings_to_json(plan_calibration(fleet(["a"]), V("v1.33.1")))
    findings: list[dict[str, Any]] = doc["findings"]  # type: ignore[assignment]
    (finding,) = findings
    assert finding == {
        "cluster": "a",
        "workload": "default/tuner",
        "api": "flowcontrol.apiserver.k8s.io/v1beta3/FlowSchema",
        "removedIn": "1.32",
        "replacement": "flowcontrol.apiserver.k8s.io/v1/FlowSchema",
        "version": "v1.32.0",
        "alreadyBroken": False,
        "action": "block",
        "destination": None,
        "source": "declared",
        "detail": "default/tuner uses flowcontrol.apiserver.k8s.io/v1beta3/FlowSchema, removed "
        "in 1.32; use flowcontrol.apiserver.k8s.io/v1/FlowSchema",
        "subject": "",
        "active": True,
        "earlyWarning": False,
    }
    assert doc["partiallyObserved"] == []
