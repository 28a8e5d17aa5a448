"""What a placement run returns, and its JSON (``calibrator place``: docs/api.md, CLI JSON).

A decision says where a workload goes and, Karmada / kube-scheduler style, why it could not go
anywhere else: a one-line ``summary`` ("3/1000 clusters available: 640 labels do not match
env=prod, ...") and ``rejected`` counts per reason by default, and the full per-cluster
``reasons`` (and every feasible cluster's scores) only for whoever asks. All are worked out
lazily, on first read, by an
``Explanation`` the scheduler attaches: at 1,000 clusters x 10,000 workloads the per-cluster
reasons are ten million strings (a gigabyte of JSON) that a plain ``place`` never needs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from orchestrator.domain.snapshot import Workload

EXCLUDED = "excluded"


class ClusterReplicas(NamedTuple):
    """One line of a decision: a cluster and how many replicas it runs (a tuple: cheap to make)."""

    name: str
    replicas: int


@dataclass(frozen=True, slots=True)
class FitSummary:
    """How many clusters could take the workload, and how many each reason ruled out.

    ``available`` counts the clusters with no reason against them (chosen or merely not
    selected); ``rejected`` is the per-cluster ``reasons`` aggregated: (reason, clusters) with
    per-cluster detail (free capacity, measured RTT) left out so that equal causes add up, most
    clusters first, then by reason. A cluster with two reasons counts under both, as in
    kube-scheduler's FitError message.
    """

    total: int
    available: int
    rejected: tuple[tuple[str, int], ...]

    @property
    def text(self) -> str:
        """``3/1000 clusters available: 640 labels do not match env=prod, 50 untolerated ...``."""
        head = f"{self.available}/{self.total} clusters available"
        if not self.rejected:
            return head
        return head + ": " + ", ".join(f"{count} {reason}" for reason, count in self.rejected)


@dataclass(frozen=True, slots=True)
class ClusterScore:
    """A feasible cluster's score from each score plugin (0..100) and its weighted total.

    ``plugins`` follows the registry order; ``total`` is the sum of each score times the
    plugin's weight, the number the scheduler ranked by (ties go to the name).
    """

    name: str
    total: int
    plugins: tuple[tuple[str, int], ...]


@dataclass(frozen=True, slots=True)
class Scores:
    """Every feasible cluster's scores for one decision, best first (as the scheduler ranks).

    For the affinity term that won, or, when none did, the first term; feasible means passing
    every filter with the free capacity the workload saw. ``weights``: (plugin, weight).
    """

    weights: tuple[tuple[str, int], ...]
    clusters: tuple[ClusterScore, ...]


@dataclass(frozen=True, slots=True)
class Moved:
    """What a decision changes against where the workload runs now, per cluster.

    ``added`` / ``removed``: (cluster, replicas) with a change, by name. ``replicas`` counts the
    replicas that leave one cluster for another (a scale-up or scale-down alone moves none).
    ``estimated``: the snapshot named the current clusters without counts, so the counts before
    are the even share that placement credits (see ``context.credited_replicas``).
    """

    added: tuple[tuple[str, int], ...] = ()
    removed: tuple[tuple[str, int], ...] = ()
    estimated: bool = False

    @property
    def replicas(self) -> int:
        """Replicas relocated: the smaller of the replicas added and those removed."""
        return min(sum(r for _, r in self.added), sum(r for _, r in self.removed))

    def to_json(self) -> dict[str, object]:
        """``{"replicas": n, "added": {cluster: n}, "removed": {cluster: n}}`` (+ estimated)."""
        out: dict[str, object] = {
            "replicas": self.replicas,
            "added": dict(self.added),
            "removed": dict(self.removed),
        }
        if self.estimated:
            out["estimated"] = True
        return out


NOTHING_MOVED = Moved()


def current_replicas(workload: Workload) -> tuple[dict[str, int], bool]:
    """Where ``workload`` runs now with how many replicas, and whether the counts are estimated."""
    policy = workload.placement
    if not policy.clusters:
        return {}, False
    counts = policy.current()
    if counts is not None:
        return counts, False
    if policy.replica_scheduling.type == "Duplicated":
        return dict.fromkeys(policy.clusters, workload.replicas), True
    return dict.fromkeys(policy.clusters, workload.replicas // len(policy.clusters)), True


def moved_between(
    before: Mapping[str, int], after: Sequence[ClusterReplicas], estimated: bool = False
) -> Moved:
    """The per-cluster difference from ``before`` to the decision's lines ``after``.

    One pass over the lines (a Duplicated decision can span the whole fleet, so no dict of
    them is built); ``added`` keeps the lines' (name) order, ``removed`` is sorted.
    """
    held = before.get
    # comprehensions: a Duplicated decision's hundreds of lines run at C speed
    added = [(name, replicas - h) for name, replicas in after if replicas > (h := held(name, 0))]
    kept = {name: replicas for name, replicas in after if name in before} if before else {}
    removed = sorted((n, r - kept.get(n, 0)) for n, r in before.items() if r > kept.get(n, 0))
    if not added and not removed:
        return NOTHING_MOVED if not estimated else Moved(estimated=True)
    return Moved(tuple(added), tuple(removed), estimated)


class Explanation(Protocol):
    """Why a decision is what it is, computed when first read (see ``placement.explain``)."""

    @property
    def reasons(self) -> Mapping[str, tuple[str, ...]]:
        """Every rejected cluster with all its reasons."""
        ...

    @property
    def summary(self) -> FitSummary:
        """The reasons counted per (summarised) reason, without building them per cluster."""
        ...

    @property
    def scores(self) -> Scores:
        """Every feasible cluster's score per plugin and in total (feasible clusters x plugins)."""
        ...


@dataclass(frozen=True, slots=True, eq=False)
class WorkloadDecision:
    """Where one workload goes, or why it cannot go anywhere.

    ``reasons`` names every rejected cluster (Karmada FitError style), also for schedulable
    workloads, so "why not there?" always has an answer; ``summary`` counts them. ``evicted``
    lists current clusters the workload leaves (NoExecute taint, API removal, exclusion, or a
    better placement). ``affinity`` is the fallback term that won (its name, or ``#index``) when
    there are several.
    """

    workload: str
    clusters: tuple[ClusterReplicas, ...]
    unschedulable: bool
    explanation: Explanation
    evicted: tuple[str, ...] = ()
    affinity: str | None = None
    # Division did what the policy alone does not say (``division.EQUAL_WEIGHTS_NOTE``).
    division_note: str = ""
    # (cluster, when) for chosen clusters a NoExecute toleration holds only for a while.
    evict_at: tuple[tuple[str, str], ...] = ()
    # The workload as placed (its current placement is what ``moved`` compares with).
    origin: Workload | None = None

    @property
    def moved(self) -> Moved:
        """Replicas added and removed per cluster against the current placement.

        An unschedulable decision changes nothing: the workload keeps running where it runs.
        Worked out on read (a plain ``place`` of 10,000 workloads builds none it does not print).
        """
        if self.origin is None or self.unschedulable:
            return NOTHING_MOVED
        before, estimated = current_replicas(self.origin)
        if not before and not self.clusters:
            return NOTHING_MOVED
        return moved_between(before, self.clusters, estimated)

    @property
    def replicas(self) -> dict[str, int]:
        """Replicas by cluster name."""
        return {c.name: c.replicas for c in self.clusters}

    @property
    def reasons(self) -> Mapping[str, tuple[str, ...]]:
        """Rejected clusters and all their reasons (built on first read: workloads x clusters)."""
        return self.explanation.reasons

    @property
    def summary(self) -> FitSummary:
        """Clusters available and rejections counted per reason (cheap: per cluster class)."""
        return self.explanation.summary

    @property
    def scores(self) -> Scores:
        """Each feasible cluster's score per plugin and in total, best first (built on read)."""
        return self.explanation.scores


@dataclass(frozen=True, slots=True)
class PlacementResult:
    """Decisions in ``namespace/name`` order."""

    decisions: tuple[WorkloadDecision, ...]

    def decision(self, workload: str) -> WorkloadDecision:
        """The decision for ``namespace/name`` (KeyError if it was not placed)."""
        for d in self.decisions:
            if d.workload == workload:
                return d
        raise KeyError(workload)

    @property
    def unschedulable(self) -> tuple[WorkloadDecision, ...]:
        """Decisions that found no placement."""
        return tuple(d for d in self.decisions if d.unschedulable)


def placement_to_json(result: PlacementResult, *, explain: bool = False) -> dict[str, object]:
    """The ``calibrator place`` document (docs/api.md, CLI JSON), with ``evicted`` and ``moved``.

    Every decision carries ``summary`` and ``rejected``, which grow with the distinct reasons,
    not with the fleet; ``explain`` adds the per-cluster ``reasons`` and, for every feasible
    cluster, its ``scores`` per plugin and total (best first) with the plugins' ``scoreWeights``
    (workloads x clusters). Each item is ``decision_to_json`` of one decision.
    """
    return {"decisions": [decision_to_json(d, explain=explain) for d in result.decisions]}


def decision_to_json(d: WorkloadDecision, *, explain: bool = False) -> dict[str, object]:
    """One item of ``placement_to_json``'s ``decisions`` (a writer can stream them one by one)."""
    summary = d.summary
    item: dict[str, object] = {
        "workload": d.workload,
        "clusters": [{"name": c.name, "replicas": c.replicas} for c in d.clusters],
        "unschedulable": d.unschedulable,
        "summary": summary.text,
        "rejected": [{"reason": r, "clusters": n} for r, n in summary.rejected],
        "evicted": list(d.evicted),
        "moved": d.moved.to_json(),
    }
    if explain:
        item["reasons"] = {name: list(reasons) for name, reasons in d.reasons.items()}
        scores = d.scores
        item["scoreWeights"] = dict(scores.weights)
        item["scores"] = [
            {"cluster": c.name, "total": c.total, "plugins": dict(c.plugins)}
            for c in scores.clusters
        ]
    if d.affinity is not None:
        item["affinity"] = d.affinity
    if d.division_note:
        item["divisionNote"] = d.division_note
    if d.evict_at:
        item["evictAt"] = dict(d.evict_at)
    return item
