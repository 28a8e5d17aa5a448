"""Cross-cluster placement (pure): a Karmada-style scheduler framework for FleetSnapshots.

``place(snapshot)`` filters, scores and divides replicas for every workload and explains every
rejected cluster; ``exclude_clusters`` answers the planner's "can these workloads leave that
cluster?" for all affected workloads in one run.
Plugins live one per file in ``plugins/``; ``framework`` holds their contracts.

Semantics worth knowing before reading a decision:

* Workloads are placed in ``namespace/name`` order, each consuming free capacity, so a batch never
  overcommits. Replicas running already where the workload stays are credited: the recorded count
  (``placement.clusters`` with replicas), else a full copy per current cluster for Duplicated and
  an even share rounded down for divided workloads. Capacity a leaving workload frees is not
  reused in the same run: the old copy runs until the new one is up.
* Stable re-placement (``stable``): with recorded counts, division starts from the replicas kept
  on clusters still usable and only adds (scale-up, replicas forced off) or removes (scale-down)
  there; ``WorkloadDecision.moved`` reports the replicas added and removed per cluster.
* Ordered fallback affinities: the first term whose whole schedule succeeds (filters *and*
  division) wins, as in Karmada; ``WorkloadDecision.affinity`` names it.
* ``reasons`` lists every cluster that was rejected, with every reason (not only the first
  failing plugin), computed lazily with the capacity the workload saw. Feasible clusters that were
  merely not selected (``maxClusters``, weight 0) are not listed; neither is a chosen cluster.
  ``summary`` counts the same reasons per reason ("3/1000 clusters available: 640 labels do not
  match env=prod, ..."), cheaply; ``placement_to_json`` writes it always, ``reasons`` on request.
* ``evicted`` = current clusters not in the new placement, whatever the cause; ``moved`` = the
  replicas added and removed per cluster against the current placement.
* Scores: TaintToleration (PreferNoSchedule) x1, ClusterLocality x2, ResourceBalance x1; ties
  break by cluster name. Locality outweighs any balance gain: a feasible current cluster is kept.
  ``WorkloadDecision.scores`` (lazily, like ``reasons``) lists every feasible cluster's score per
  plugin and in total, best first.
* Spread constraints (by cluster, region, zone or provider) choose groups and clusters after
  scoring (``spread``); a spread that cannot be met fails the attempt with the reason.
"""

from orchestrator.placement.context import PlacementContext
from orchestrator.placement.framework import (
    FITS,
    FilterPlugin,
    FilterResult,
    Registry,
    ScorePlugin,
    unfit,
)
from orchestrator.placement.plugins import DEFAULT_REGISTRY
from orchestrator.placement.result import (
    EXCLUDED,
    ClusterReplicas,
    FitSummary,
    Moved,
    PlacementResult,
    WorkloadDecision,
    decision_to_json,
    placement_to_json,
)
from orchestrator.placement.scheduler import decide, place

__all__ = [
    "DEFAULT_REGISTRY",
    "EXCLUDED",
    "FITS",
    "ClusterReplicas",
    "FilterPlugin",
    "FilterResult",
    "FitSummary",
    "Moved",
    "PlacementContext",
    "PlacementResult",
    "Registry",
    "ScorePlugin",
    "WorkloadDecision",
    "decide",
    "decision_to_json",
    "place",
    "placement_to_json",
    "unfit",
]
