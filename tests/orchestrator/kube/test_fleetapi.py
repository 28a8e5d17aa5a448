"""calibrator.dev/v1alpha1 objects <-> the snapshot workload model, CRD shape, and the writer."""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator, Mapping
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from orchestrator.domain.apicatalog import catalog
from orchestrator.domain.location import FIELD_OPERATORS, FIELDS, SPREAD_FIELDS, value_error
from orchestrator.domain.snapshot import DIVISION_TYPES, FleetSnapshot, Workload
from orchestrator.domain.snapshot_dump import snapshot_to_mapping
from orchestrator.domain.snapshot_load import load_snapshot, snapshot_from_mapping
from orchestrator.kube import fleetapi
from tests.orchestrator.kube.fake_dyn import NS, ApiError, FakeDyn

ROOT = Path(__file__).parents[3]
EXAMPLE = load_snapshot((ROOT / "examples" / "fleet.yaml").read_text())


def _parse(example: FleetSnapshot, entries: list[dict[str, Any]]) -> tuple[Workload, ...]:
    """Parse workload entries with the example's clusters (the snapshot rules validate them)."""
    mapping = snapshot_to_mapping(example)
    mapping["workloads"] = entries
    return snapshot_from_mapping(mapping).workloads


@pytest.mark.parametrize("workload", EXAMPLE.workloads, ids=lambda w: w.key)
def test_model_to_object_to_model_round_trip(workload: Workload) -> None:
    obj = fleetapi.fleet_workload(workload)
    assert obj["apiVersion"] == "calibrator.dev/v1alpha1" and obj["kind"] == "FleetWorkload"
    assert obj["metadata"] == {"name": workload.name, "namespace": workload.namespace}
    assert set(obj["spec"]) <= {"apis", "replicas", "requests", "placement"}
    assert _parse(EXAMPLE, [fleetapi.workload_entry(obj)]) == (workload,)


def test_object_fields_mirror_the_snapshot_entry() -> None:
    obj = {
        "apiVersion": "calibrator.dev/v1alpha1",
        "kind": "FleetWorkload",
        "metadata": {"name": "api", "namespace": "shop", "uid": "u", "generation": 2},
        "spec": {
            "apis": ["apps/v1/Deployment", "v1/ConfigMap"],
            "replicas": 4,
            "requests": {"cpu": "500m", "memory": "1Gi"},
            "placement": {
                "clusterAffinities": [
                    {"name": "eu", "matchLabels": {"region": "eu"}, "exclude": ["prod-eu-2"]},
                    {
                        "name": "any-prod",
                        "matchExpressions": [{"key": "env", "operator": "In", "values": ["prod"]}],
                    },
                ],
                "tolerations": [{"key": "example.com/maintenance", "operator": "Exists"}],
                "replicaScheduling": {
                    "type": "Weighted",
                    "weights": [{"matchLabels": {"region": "eu"}, "weight": 3, "maxReplicas": 3}],
                },
                "maxLatency": {"cluster": "prod-eu-1", "rttMs": 50},
                "maxClusters": 2,
                "clusters": ["prod-eu-1"],
            },
        },
    }
    entry = fleetapi.workload_entry(obj)
    assert entry == {"name": "api", "namespace": "shop", "generation": 2, **obj["spec"]}  # type: ignore[dict-item]
    (workload,) = _parse(EXAMPLE, [entry])
    assert [a.name for a in workload.placement.affinities] == ["eu", "any-prod"]
    assert workload.placement.replica_scheduling.weights[0].max_replicas == 3
    assert workload.placement.max_latency is not None
    assert (
        fleetapi.fleet_workload(workload)["spec"]
        == fleetapi.fleet_workload(
            _parse(EXAMPLE, [fleetapi.workload_entry(fleetapi.fleet_workload(workload))])[0]
        )["spec"]
    )


def test_status_clusters_are_the_current_placement() -> None:
    obj: dict[str, Any] = {
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {"placement": {"clusters": ["prod-eu-1"]}},
    }
    assert fleetapi.workload_entry(obj)["placement"]["clusters"] == ["prod-eu-1"]
    obj["status"] = {"clusters": [{"name": "prod-us-1", "replicas": 2}]}
    # The decision's counts come along: re-placement scales from them.
    current = [{"name": "prod-us-1", "replicas": 2}]
    assert fleetapi.workload_entry(obj)["placement"]["clusters"] == current
    bare = {"metadata": {"name": "w", "namespace": "n"}, "status": obj["status"]}
    assert fleetapi.workload_entry(bare) == {
        "name": "w",
        "namespace": "n",
        "placement": {"clusters": current},
    }
    assert "placement" not in fleetapi.workload_entry(
        {"metadata": {"name": "w", "namespace": "n"}, "spec": {}}
    )


@pytest.mark.parametrize("decided", [False, True], ids=["declared", "decided"])
def test_building_and_parsing_an_entry_never_changes_the_stored_object(decided: bool) -> None:
    """Entries share the cached object's spec values (no copy): nothing may write through them."""
    obj: dict[str, Any] = {
        "metadata": {"name": "web", "namespace": "shop", "generation": 1},
        "spec": {
            "apis": ["apps/v1/Deployment"],
            "replicas": 2,
            "requests": {"cpu": "100m"},
            "placement": {"clusters": ["prod-eu-1", "gone"], "maxClusters": 2},
        },
    }
    if decided:
        obj["status"] = {"clusters": [{"name": "gone", "replicas": 2}], "observedGeneration": 1}
    stored = copy.deepcopy(obj)
    entry = fleetapi.current_on_inventory(fleetapi.workload_entry(obj), {"prod-eu-1"})
    assert entry["placement"]["clusters"] == ([] if decided else ["prod-eu-1"])
    _parse(EXAMPLE, [entry])
    assert obj == stored


def test_generations_say_whether_the_counts_were_decided_under_the_current_spec() -> None:
    obj: dict[str, Any] = {
        "metadata": {"name": "web", "namespace": "shop", "generation": 3},
        "spec": {"replicas": 4, "placement": {"replicaScheduling": {"type": "Weighted"}}},
        "status": {"clusters": [{"name": "prod-eu-1", "replicas": 3}], "observedGeneration": 3},
    }
    entry = fleetapi.workload_entry(obj)
    assert entry["generation"] == 3 and entry["placement"]["observedGeneration"] == 3
    (workload,) = _parse(EXAMPLE, [entry])
    assert workload.policy_observed
    obj["metadata"]["generation"] = 4  # the spec changed after the decision
    (changed,) = _parse(EXAMPLE, [fleetapi.workload_entry(obj)])
    assert not changed.policy_observed
    # Neither field is ever written back into a spec.
    spec = fleetapi.fleet_workload(workload)["spec"]
    assert "generation" not in spec and "observedGeneration" not in spec["placement"]


@pytest.mark.parametrize(
    ("clusters", "kept"),
    [
        (["c1", "gone"], ["c1"]),
        (
            [{"name": "gone", "replicas": 2}, {"name": "c1", "replicas": 0}],
            [{"name": "c1", "replicas": 0}],
        ),
        ([], []),
    ],
)
def test_current_on_inventory_keeps_only_inventory_clusters(
    clusters: list[Any], kept: list[Any]
) -> None:
    entry = {"name": "w", "placement": {"clusters": clusters}}
    assert fleetapi.current_on_inventory(entry, {"c1"})["placement"]["clusters"] == kept
    assert fleetapi.current_on_inventory({"name": "w"}, {"c1"}) == {"name": "w"}


def test_default_workload_is_a_minimal_object() -> None:
    obj = fleetapi.fleet_workload(Workload("w", "n"))
    assert obj["spec"] == {"apis": [], "replicas": 1, "placement": {}}
    entry = fleetapi.workload_entry(obj)
    assert _parse(EXAMPLE, [entry]) == (Workload("w", "n"),)


OWNER = {"metadata": {"name": "web", "namespace": "shop", "uid": "u-1", "generation": 7}}
DECISION = fleetapi.PlacementDecision(
    "shop/web", (("prod-eu-1", 2), ("prod-us-1", 10)), "x: after step 1/2"
)


def test_placement_decision_is_the_argo_cd_duck_type() -> None:
    rows = fleetapi.decision_rows(DECISION)
    assert rows == [
        {"clusterName": "prod-eu-1", "replicas": "2", "reason": "x: after step 1/2"},
        {"clusterName": "prod-us-1", "replicas": "10", "reason": "x: after step 1/2"},
    ]
    assert all(isinstance(v, str) for row in rows for v in row.values())
    status = fleetapi.placement_decision_status(OWNER, DECISION)
    assert status["metadata"] == {"name": "web", "namespace": "shop"}
    assert status["status"] == {"decisions": rows}
    pd = fleetapi.placement_decision(OWNER)
    assert pd["metadata"]["labels"] == {"calibrator.dev/fleet-workload": "web"}
    assert pd["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "calibrator.dev/v1alpha1",
            "kind": "FleetWorkload",
            "name": "web",
            "uid": "u-1",
            "controller": True,
        }
    ]
    assert "status" not in pd and "spec" not in pd


def test_fleet_workload_status() -> None:
    now = datetime(2026, 3, 1, 12, 0, 5, 123, tzinfo=UTC)
    body = fleetapi.fleet_workload_status(OWNER, DECISION, now)
    assert body["status"] == {
        "clusters": [{"name": "prod-eu-1", "replicas": 2}, {"name": "prod-us-1", "replicas": 10}],
        "selectedClusters": 2,
        "reason": "x: after step 1/2",
        "lastUpdateTime": "2026-03-01T12:00:05Z",
        "observedGeneration": 7,
    }
    # ... and it is what the reader takes as the current placement
    obj = {**OWNER, "spec": {}, "status": body["status"]}
    assert fleetapi.workload_entry(obj)["placement"]["clusters"] == body["status"]["clusters"]


# ------------------------------------------------------------------------------------ CRDs


def _nodes(schema: Mapping[str, Any], path: str = "") -> Iterator[tuple[str, Mapping[str, Any]]]:
    yield path, schema
    for name, sub in (schema.get("properties") or {}).items():
        yield from _nodes(sub, f"{path}.{name}")
    if isinstance(schema.get("items"), Mapping):
        yield from _nodes(schema["items"], f"{path}[]")
    if isinstance(schema.get("additionalProperties"), Mapping):
        yield from _nodes(schema["additionalProperties"], f"{path}{{}}")


def _crd(kind: str) -> dict[str, Any]:
    (crd,) = [c for c in fleetapi.crd_manifests() if c["spec"]["names"]["kind"] == kind]
    return crd


def crd_schema(kind: str) -> dict[str, Any]:
    """The openAPIV3Schema of our CRD ``kind``; public because the placement tests read it too."""
    (version,) = _crd(kind)["spec"]["versions"]
    schema: dict[str, Any] = version["schema"]["openAPIV3Schema"]
    return schema


def test_crds_are_namespaced_v1alpha1_with_status_and_structural_schemas() -> None:
    crds = fleetapi.crd_manifests()
    assert sorted(c["metadata"]["name"] for c in crds) == sorted(fleetapi.CRD_NAMES)
    for crd in crds:
        assert crd["spec"]["group"] == "calibrator.dev"
        assert crd["spec"]["scope"] == "Namespaced"
        (version,) = crd["spec"]["versions"]
        assert (version["name"], version["served"], version["storage"]) == ("v1alpha1", True, True)
        assert version["subresources"] == {"status": {}}
        assert version["additionalPrinterColumns"]
        for path, node in _nodes(version["schema"]["openAPIV3Schema"]):
            # structural: every node has a type (or is int-or-string), no $ref
            assert "type" in node or node.get("x-kubernetes-int-or-string"), path
            assert "$ref" not in node, path


def test_fleet_workload_spec_mirrors_the_snapshot_workload() -> None:
    spec = crd_schema("FleetWorkload")["properties"]["spec"]["properties"]
    assert set(spec) == {"apis", "replicas", "requests", "placement"}
    placement = spec["placement"]["properties"]
    assert set(placement) == {
        "clusterAffinity",
        "clusterAffinities",
        "tolerations",
        "clusters",
        "replicaScheduling",
        "maxLatency",
        "maxClusters",
        "spreadConstraints",
    }
    affinity = {
        "name",
        "matchLabels",
        "matchExpressions",
        "fieldSelector",
        "clusterNames",
        "exclude",
    }
    assert set(placement["clusterAffinity"]["properties"]) == affinity
    assert placement["clusterAffinities"]["items"] == placement["clusterAffinity"]
    assert set(placement["tolerations"]["items"]["properties"]) == {
        "key",
        "operator",
        "value",
        "effect",
        "tolerationSeconds",
    }
    rs = placement["replicaScheduling"]["properties"]
    assert rs["type"]["enum"] == list(DIVISION_TYPES)
    assert set(rs["weights"]["items"]["properties"]) == {
        "cluster",
        "matchLabels",
        "weight",
        "minReplicas",
        "maxReplicas",
    }
    assert set(placement["maxLatency"]["properties"]) == {"cluster", "region", "rttMs"}
    fields = placement["clusterAffinity"]["properties"]["fieldSelector"]["properties"]
    expression = fields["matchExpressions"]["items"]["properties"]
    assert expression["key"]["enum"] == list(FIELDS)
    assert expression["operator"]["enum"] == list(FIELD_OPERATORS)
    value = re.compile(expression["values"]["items"]["pattern"])
    for text in ("eu-west-1", "a", "Zone_1.b", "", "-eu", "eu west"):
        assert bool(value.match(text)) == (not value_error(text)), text
    spread = placement["spreadConstraints"]["items"]["properties"]
    assert set(spread) == {"spreadByField", "minGroups", "maxGroups"}
    assert spread["spreadByField"]["enum"] == list(SPREAD_FIELDS)


def test_fleet_workload_with_fields_and_spreads_reads_into_the_snapshot() -> None:
    """What the CRD admits, the snapshot parser takes (and its dump is what the CRD admits)."""
    placement = {
        "clusterAffinity": {
            "fieldSelector": {
                "matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["eu-1c"]}]
            }
        },
        "spreadConstraints": [
            {"spreadByField": "region", "minGroups": 2, "maxGroups": 3},
            {"spreadByField": "cluster", "minGroups": 2},
        ],
    }
    obj = {
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {"apis": ["apps/v1/Deployment"], "placement": placement},
    }
    entry = fleetapi.workload_entry(obj)
    snapshot = snapshot_from_mapping(
        {"clusters": [{"name": "a", "controlPlane": {"version": "v1.33.0"}}], "workloads": [entry]}
    )
    (w,) = snapshot.workloads
    assert [c.field for c in w.placement.spread_constraints] == ["cluster", "region"]
    again = fleetapi.fleet_workload(w)["spec"]["placement"]
    assert again["clusterAffinity"] == placement["clusterAffinity"]
    assert sorted(again["spreadConstraints"], key=str) == sorted(
        placement["spreadConstraints"], key=str
    )


def test_api_pattern_accepts_every_catalog_api() -> None:
    spec = crd_schema("FleetWorkload")["properties"]["spec"]["properties"]
    pattern = re.compile(spec["apis"]["items"]["pattern"])
    apis = {str(a) for w in EXAMPLE.workloads for a in w.apis} | {str(a) for a in catalog()}
    assert apis
    assert all(pattern.match(a) for a in apis), sorted(a for a in apis if not pattern.match(a))
    assert not pattern.match("apps/Deployment/v1") and not pattern.match("apps/v1")


def test_placement_decision_status_items_are_strings() -> None:
    status = crd_schema("PlacementDecision")["properties"]["status"]
    assert status["required"] == ["decisions"]
    items = status["properties"]["decisions"]["items"]
    assert set(items["required"]) == {"clusterName", "replicas", "reason"}
    assert {p["type"] for p in items["properties"].values()} == {"string"}


# ------------------------------------------------------------------------------------ I/O


def test_reader_is_one_list_call_and_missing_crds_are_named() -> None:
    dyn = FakeDyn()
    dyn.add("FleetWorkload", {"metadata": {"name": "a"}, "spec": {}})
    dyn.add("FleetWorkload", {"metadata": {"name": "b", "namespace": "other"}, "spec": {}})
    assert [o["metadata"]["name"] for o in fleetapi.list_fleet_workloads(dyn, NS)] == ["a"]
    assert len(fleetapi.list_fleet_workloads(dyn)) == 2
    missing = FakeDyn(missing=("FleetWorkload",))
    with pytest.raises(fleetapi.ApiMissingError, match="does not serve FleetWorkload"):
        fleetapi.list_fleet_workloads(missing, NS)
    assert missing.invalidations == 1  # discovery refreshed once before giving up


def test_writer_links_once_and_rewrites_status() -> None:
    dyn = FakeDyn()
    dyn.add("FleetWorkload", {"metadata": {"name": "web", "uid": "u", "generation": 1}})
    first = fleetapi.PlacementDecision(f"{NS}/web", (("a", 1),), "one")
    second = fleetapi.PlacementDecision(f"{NS}/web", (("b", 2), ("c", 2)), "two")
    when = datetime(2026, 1, 1, tzinfo=UTC)
    outcome = fleetapi.write_placement_decisions(dyn, [first], NS, when)
    assert outcome == fleetapi.WriteOutcome((f"{NS}/web",), ())
    assert [(verb, kind) for verb, kind, _, _ in dyn.writes] == [
        ("apply", "PlacementDecision"),
        ("apply-status", "FleetWorkload"),
        ("apply-status", "PlacementDecision"),
    ]
    dyn.writes.clear()
    fleetapi.write_placement_decisions(dyn, [second], NS, when)
    assert [(verb, kind) for verb, kind, _, _ in dyn.writes] == [
        ("apply-status", "FleetWorkload"),
        ("apply-status", "PlacementDecision"),
    ]
    pd = dyn.objects["PlacementDecision"][(NS, "web")]
    assert [r["clusterName"] for r in pd["status"]["decisions"]] == ["b", "c"]
    assert dyn.objects["FleetWorkload"][(NS, "web")]["status"]["selectedClusters"] == 2
    assert fleetapi.write_placement_decisions(dyn, [], NS) == fleetapi.WriteOutcome()
    with pytest.raises(fleetapi.WorkloadMissingError, match=f"no FleetWorkload {NS}/nope"):
        fleetapi.write_placement_decisions(dyn, [replace(first, workload=f"{NS}/nope")], NS)


@pytest.mark.parametrize(
    ("quantity", "parses"),
    [
        ("500m", True),
        ("1.5Gi", True),
        ("2e3", True),
        ("1e-30", True),
        ("5e17", True),
        ("1e1000000", False),
        ("1e31", False),
        ("9" * 65, False),
        ("-1", False),
    ],
)
def test_quantity_pattern_admits_no_exponent_or_length_the_parser_refuses(
    quantity: str, parses: bool
) -> None:
    """The CRD is the first gate: what it admits, the snapshot parser must accept too.

    (Magnitude is the parser's own bound, 2^63-1 base units: a regex cannot say it exactly.)
    """
    from orchestrator.domain.errors import InputError
    from orchestrator.domain.quantity import parse_memory_bytes

    spec = crd_schema("FleetWorkload")["properties"]["spec"]["properties"]
    cpu = spec["requests"]["properties"]["cpu"]
    admitted = bool(re.match(cpu["pattern"], quantity)) and len(quantity) <= cpu["maxLength"]
    try:
        parse_memory_bytes(quantity)
        parsed = True
    except InputError:
        parsed = False
    assert (admitted, parsed) == (parses, parses)
    assert spec["replicas"]["maximum"] == 1_000_000


def test_writer_skips_unchanged_decisions_and_repairs_a_stale_mirror() -> None:
    dyn = FakeDyn()
    dyn.add("FleetWorkload", {"metadata": {"name": "web", "uid": "u", "generation": 1}})
    decision = fleetapi.PlacementDecision(f"{NS}/web", (("a", 1),), "one")
    fleetapi.write_placement_decisions(dyn, [decision], NS)
    dyn.writes.clear()
    again = replace(decision, reason="another step, same outcome")
    assert fleetapi.write_placement_decisions(dyn, [again], NS) == fleetapi.WriteOutcome()
    assert dyn.writes == []
    # A writer stopped after its commit: the mirror lags, and the next write repairs only it.
    dyn.objects["PlacementDecision"][(NS, "web")]["status"]["decisions"] = []
    outcome = fleetapi.write_placement_decisions(dyn, [again], NS)
    assert outcome.written == (f"{NS}/web",)
    assert [(verb, kind) for verb, kind, _, _ in dyn.writes] == [
        ("apply-status", "PlacementDecision")
    ]


def test_writer_is_a_compare_and_swap_on_the_fleet_workload() -> None:
    dyn = FakeDyn()
    dyn.add("FleetWorkload", {"metadata": {"name": "web", "uid": "u", "generation": 1}})
    read = fleetapi.workload_versions(fleetapi.list_fleet_workloads(dyn, NS))[f"{NS}/web"]
    mine = fleetapi.PlacementDecision(f"{NS}/web", (("a", 1),), "a: after step 1/2", read)
    theirs = fleetapi.PlacementDecision(f"{NS}/web", (("b", 1),), "b: after step 1/2", read)
    assert fleetapi.write_placement_decisions(dyn, [theirs], NS).written == (f"{NS}/web",)
    dyn.writes.clear()
    # Computed from the same read, now stale: nothing is written, the caller re-reads.
    outcome = fleetapi.write_placement_decisions(dyn, [mine], NS)
    assert outcome == fleetapi.WriteOutcome((), (f"{NS}/web",))
    assert dyn.writes == []
    assert fleetapi.stored_clusters(dyn.objects["FleetWorkload"][(NS, "web")]) == (("b", 1),)
    fresh = fleetapi.workload_versions(fleetapi.list_fleet_workloads(dyn, NS))[f"{NS}/web"]
    outcome = fleetapi.write_placement_decisions(dyn, [replace(mine, resource_version=fresh)], NS)
    assert outcome.written == (f"{NS}/web",)
    pd = dyn.objects["PlacementDecision"][(NS, "web")]
    assert [r["clusterName"] for r in pd["status"]["decisions"]] == ["a"]


def test_a_workload_that_outlived_its_namespace_is_skipped_not_fatal() -> None:
    """An orphan (its namespace force-finalized first) is listed but holds no decision."""
    dyn = FakeDyn()
    dyn.add("FleetWorkload", {"metadata": {"name": "web", "uid": "u", "generation": 1}})
    dyn.gone_namespaces.add(NS)
    gone = fleetapi.PlacementDecision(f"{NS}/web", (("a", 1),), "one")
    assert fleetapi.write_placement_decisions(dyn, [gone], NS) == fleetapi.WriteOutcome()
    assert not dyn.objects.get("PlacementDecision") and dyn.writes == []


def test_a_404_for_the_object_itself_still_fails() -> None:
    dyn = FakeDyn()
    dyn.add("FleetWorkload", {"metadata": {"name": "web", "uid": "u", "generation": 1}})
    decision = fleetapi.PlacementDecision(f"{NS}/web", (("a", 1),), "one")
    writer = fleetapi.PlacementWriter(dyn, [decision], NS)
    del dyn.objects["FleetWorkload"][(NS, "web")]  # deleted after the LIST: its status 404s
    with pytest.raises(ApiError) as caught:
        writer.write(decision)
    assert caught.value.status == 404


def test_the_crds_kustomization_lists_exactly_the_crd_files() -> None:
    """deploy/base applies the CRDs through this kustomization: one copy, no file forgotten."""
    folder = Path(fleetapi.__file__).parent / "crds"
    kustomization = yaml.safe_load((folder / fleetapi.CRD_KUSTOMIZATION).read_text())
    files = sorted(p.name for p in folder.glob("*.yaml") if p.name != fleetapi.CRD_KUSTOMIZATION)
    assert sorted(kustomization["resources"]) == files
    listed = [d for f in files for d in yaml.safe_load_all((folder / f).read_text()) if d]
    assert listed == fleetapi.crd_manifests()
