"""Stable re-placement properties (issue 15 §3, docs/decisions.md "Stable re-placement").

A fleet and one workload are drawn; the workload is placed, and its result *settled*: the counts
written back as its current placement and its usage added to ``allocated``, as the live fleet
would be once the decision ran. Then:

* placing the settled fleet again moves nothing;
* a step that taints clusters NoExecute, takes capacity from them or lowers ``maxClusters``
  moves at most the replicas the tainted clusters held, those the shrunk clusters no longer hold
  and those on the clusters the lower ``maxClusters`` drops, and takes none from any cluster the
  workload keeps. The settled fleet carries the generation its counts were decided under, as
  the live writer records it, or none (a hand-written snapshot): without it, a Weighted
  workload with a cluster below its ``minReplicas`` is divided from scratch by design (a new
  minimum cannot be ruled out; docs/decisions.md), so the bound is checked there only when the
  policy is known to be observed;
* a scale-up of a divided workload takes from no cluster, a scale-down adds to none. (A
  Duplicated workload is left out there: a full copy per cluster is its minimum share, so its
  replica count decides which clusters fit at all.)

Few distinct capacities and weights are drawn, so that ties (the delicate part) are common.
"""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from orchestrator.domain.snapshot_load import snapshot_from_mapping
from orchestrator.placement import place
from orchestrator.placement.result import WorkloadDecision

CPU_PER_REPLICA = 250  # millicores
MODES = ("Duplicated", "Weighted", "WeightedEntries", "Dynamic", "Aggregated")


@st.composite
def fleets(draw: st.DrawFn) -> dict[str, Any]:
    """A fleet mapping with one workload ``default/w`` (no current placement yet)."""
    n = draw(st.integers(1, 6))
    clusters = []
    for i in range(n):
        cores = draw(st.sampled_from([None, 1, 2, 2, 4]))
        item: dict[str, Any] = {
            "name": f"c{i}",
            "labels": {"region": f"r{i % 2}"},
            "controlPlane": {"version": "v1.33.0"},
        }
        if cores is not None:
            item["capacity"] = {"cpu": str(cores), "memory": "64Gi"}
            item["allocated"] = {"cpu": "0", "memory": "0"}
        clusters.append(item)
    mode = draw(st.sampled_from(MODES))
    replicas = draw(st.integers(1, 14))
    placement: dict[str, Any] = {}
    if draw(st.booleans()):
        placement["maxClusters"] = draw(st.integers(1, n))
    if mode == "WeightedEntries":
        weights = []
        floors = 0
        for i in range(n):
            if draw(st.integers(0, 3)) == 0:
                continue
            entry: dict[str, Any] = {"cluster": f"c{i}", "weight": draw(st.integers(0, 4))}
            low = draw(st.sampled_from([0, 0, 1]))
            if low and floors + low <= replicas:
                entry["minReplicas"] = low
                floors += low
            high = draw(st.sampled_from([None, None, 2, 5]))
            if high is not None:
                entry["maxReplicas"] = max(high, low)
            weights.append(entry)
        placement["replicaScheduling"] = {"type": "Weighted", "weights": weights}
    elif mode != "Duplicated":
        placement["replicaScheduling"] = {"type": mode}
    workload = {
        "name": "w",
        "replicas": replicas,
        "requests": {"cpu": f"{CPU_PER_REPLICA}m", "memory": "1Mi"},
        "placement": placement,
    }
    return {"clusters": clusters, "workloads": [workload]}


def _place(mapping: dict[str, Any]) -> WorkloadDecision:
    return place(snapshot_from_mapping(mapping)).decision("default/w")


def _settled(
    mapping: dict[str, Any], decision: WorkloadDecision, *, observed: bool = False
) -> dict[str, Any]:
    """The fleet once ``decision`` runs: counts recorded, usage inside ``allocated``.

    ``observed``: the counts carry the generation they were decided under, as the live writer
    records it (``Workload.policy_observed``).
    """
    out = copy.deepcopy(mapping)
    workload = out["workloads"][0]
    if observed:
        workload["generation"] = 1
        workload["placement"]["observedGeneration"] = 1
    old = {c["name"]: c["replicas"] for c in workload["placement"].get("clusters", [])}
    new = decision.replicas
    for item in out["clusters"]:
        if "capacity" in item:
            used = int(item["allocated"]["cpu"].rstrip("m") or 0)
            delta = (new.get(item["name"], 0) - old.get(item["name"], 0)) * CPU_PER_REPLICA
            item["allocated"]["cpu"] = f"{used + delta}m"
    workload["placement"]["clusters"] = [{"name": n, "replicas": r} for n, r in sorted(new.items())]
    return out


def _placed(mapping: dict[str, Any]) -> WorkloadDecision:
    decision = _place(mapping)
    assume(not decision.unschedulable)
    return decision


@settings(max_examples=300, deadline=None)
@given(fleets(), st.booleans())
def test_placing_its_own_result_again_moves_nothing(
    mapping: dict[str, Any], observed: bool
) -> None:
    first = _placed(mapping)
    again = _place(_settled(mapping, first, observed=observed))
    assert again.replicas == first.replicas
    assert not again.moved.added and not again.moved.removed
    assert again.moved.replicas == 0


@settings(max_examples=300, deadline=None)
@given(fleets(), st.data())
def test_a_step_moves_only_what_it_made_infeasible(mapping: dict[str, Any], data: Any) -> None:
    first = _placed(mapping)
    observed = data.draw(st.booleans())
    settled = _settled(mapping, first, observed=observed)
    before = first.replicas
    names = [c["name"] for c in settled["clusters"]]
    tainted = data.draw(st.sets(st.sampled_from(names), max_size=len(names)))
    # Capacity lost on some clusters: down to a number of replicas' worth below what they use.
    sized = [c["name"] for c in settled["clusters"] if "capacity" in c]
    shrunk = data.draw(st.dictionaries(st.sampled_from(sized), st.integers(0, 4))) if sized else {}
    forced = sum(before.get(n, 0) for n in tainted)
    for item in settled["clusters"]:
        if item["name"] in tainted:
            item["taints"] = [{"key": "example.com/down", "effect": "NoExecute"}]
        if item["name"] in shrunk:
            used = int(item["allocated"]["cpu"].rstrip("m"))
            item["capacity"]["cpu"] = f"{shrunk[item['name']] * CPU_PER_REPLICA}m"
            if item["name"] not in tainted:
                over = max(0, used - shrunk[item["name"]] * CPU_PER_REPLICA)
                forced += min(before.get(item["name"], 0), -(-over // CPU_PER_REPLICA))
    # A changed constraint: maxClusters lowered below the clusters in use.
    policy = settled["workloads"][0]["placement"]
    used = len(before)
    lowered = used > 1 and data.draw(st.booleans())
    if lowered:
        policy["maxClusters"] = data.draw(st.integers(1, used - 1))
    after = _place(settled)
    assume(not after.unschedulable)
    if lowered:
        # The constraint forces off whatever the clusters it drops ran.
        forced += sum(r for n, r in before.items() if n not in after.replicas and n not in tainted)
    floors = any("minReplicas" in w for w in policy.get("replicaScheduling", {}).get("weights", []))
    if floors and not observed:
        return  # from scratch when a usable cluster is below its floor (module docstring)
    assert after.moved.replicas <= forced
    for name, replicas in before.items():
        if name not in tainted and name not in shrunk and (not lowered or name in after.replicas):
            assert after.replicas.get(name, 0) >= replicas, (name, before, after.replicas)
    if not shrunk and not lowered:
        assert dict(after.moved.removed) == {n: before[n] for n in tainted if before.get(n)}


@settings(max_examples=300, deadline=None)
@given(fleets(), st.integers(1, 14))
def test_scaling_adds_or_removes_where_replicas_run(mapping: dict[str, Any], target: int) -> None:
    assume("replicaScheduling" in mapping["workloads"][0]["placement"])
    first = _placed(mapping)
    settled = _settled(mapping, first)
    weights = settled["workloads"][0]["placement"].get("replicaScheduling", {}).get("weights", [])
    assume(sum(w.get("minReplicas", 0) for w in weights) <= target)
    settled["workloads"][0]["replicas"] = target
    after = _place(settled)
    assume(not after.unschedulable)
    before = first.replicas
    assert after.moved.replicas == 0
    total = sum(before.values())
    if target >= total:
        assert not after.moved.removed
    if target <= total:
        assert not after.moved.added
        assert set(after.replicas) <= set(before)
