"""Compatibility checks (pure): what a planned version would break on each cluster.

Three sources feed one ``Finding`` type, so that ``check``, ``plan`` and the workflow weigh them
with one set of rules and one JSON shape:

- **declared**: a FleetWorkload's ``spec.apis`` that a planned version no longer serves (a
  placement move can save the step);
- **observed**: an ``ApiUsage`` the workload cluster's apiserver or stored objects showed
  (``metric``, ``managedFields``, ``annotation``). Nobody declared it, so no workload can be
  moved: the step blocks or warns, as the strategy says. It is matched to the catalog by API:
  the catalog decides removal (the apiserver's ``removed_release`` is informative);
- **pdb**: a ``DisruptionBlocker``, a PodDisruptionBudget no eviction can satisfy, on a cluster
  whose workers roll: the drain, and with it the step, would never finish.

Run before planning (to block, move or warn) and again after every upgrade step (to confirm),
so the functions take explicit versions rather than a plan.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Literal

from orchestrator.domain.apicatalog import lifecycle, removed_apis
from orchestrator.domain.apis import ApiRef
from orchestrator.domain.observed import SOURCE_TEXT
from orchestrator.domain.snapshot import Cluster, FleetSnapshot, Workload
from orchestrator.domain.versions import KubeVersion

FindingSource = Literal["declared", "metric", "managedFields", "annotation", "pdb"]
FINDING_SOURCES: Final[tuple[FindingSource, ...]] = (
    "declared",
    "metric",
    "managedFields",
    "annotation",
    "pdb",
)


@dataclass(frozen=True, slots=True)
class Finding:
    """Something on a cluster that a step of the path would break.

    ``already_broken`` is set when the cluster's current version already lacks the API: the
    upgrade does not make it worse, so such a finding never blocks a plan.

    ``source`` says where it was found (module docstring). A declared finding names its
    ``workload``; an observed or pdb one has none ("") and says what was seen in ``detail`` (the
    usage's or blocker's ``describe()``), with ``subject`` naming the object: the PDB's
    ``namespace/name``, or the usage's example object or apiserver instance. ``active`` is
    False for a usage whose requests stopped growing (``ApiUsage.active``): real, reported,
    never blocking. ``early_warning`` marks a usage of an API the path still serves
    everywhere (``version`` is then the path's last version, and ``removed_in`` the later
    release that removes it): a warning to act before the next calibration, never a block.
    A pdb finding has no API: ``version`` is the first worker step, the rollout it would stall.
    """

    cluster: str
    workload: str
    api: str
    removed_in: str
    replacement: str
    version: KubeVersion
    already_broken: bool = False
    source: FindingSource = "declared"
    detail: str = ""
    subject: str = ""
    active: bool = True
    early_warning: bool = False

    @property
    def observed(self) -> bool:
        """Seen on the cluster rather than declared by a FleetWorkload (no placement move)."""
        return self.source != "declared"

    @property
    def label(self) -> str:
        """Who or what the finding is about, for one-line lists (``--fail-on`` hits)."""
        if self.source == "declared":
            return self.workload
        if self.source == "pdb":
            return f"PodDisruptionBudget {self.subject}"
        return f"{self.api} ({SOURCE_TEXT[self.source]})"

    def describe(self) -> str:
        """One line for tables and block reasons, naming the source of an observed finding."""
        if self.source == "pdb":
            return self.detail
        use = f"; use {self.replacement}" if self.replacement else "; no replacement"
        if self.source == "declared":
            return f"{self.workload} uses {self.api}, removed in {self.removed_in}{use}"
        if self.early_warning:
            return f"{self.detail}; {self.api} is deprecated, removed in {self.removed_in}{use}"
        return f"{self.detail}; {self.api} removed in {self.removed_in}{use}"


def workloads_by_cluster(workloads: Iterable[Workload]) -> dict[str, list[Workload]]:
    """Index workloads by the clusters they currently run on."""
    index: dict[str, list[Workload]] = defaultdict(list)
    for workload in workloads:
        for name in workload.placement.clusters:
            index[name].append(workload)
    return index


def cluster_findings(
    cluster: Cluster, versions: Sequence[KubeVersion], workloads: Iterable[Workload]
) -> list[Finding]:
    """Findings for the workloads on ``cluster`` at the first of ``versions`` that breaks each API.

    With no versions (cluster already at target) the current version is checked instead.
    """
    current = cluster.control_plane.version
    to_check = tuple(versions) or (current,)
    out: list[Finding] = []
    for workload in workloads:
        seen: set[str] = set()
        for version in to_check:
            for record in removed_apis(workload.apis, version):
                api = str(record.api)
                if api in seen:
                    continue
                seen.add(api)
                out.append(
                    Finding(
                        cluster=cluster.name,
                        workload=workload.key,
                        api=api,
                        removed_in=record.removed_in_text,
                        replacement=record.replacement_api,
                        version=version,
                        already_broken=current.minor_key >= record.removed_in,
                    )
                )
    return out


def removed_at(api: ApiRef, versions: Sequence[KubeVersion]) -> KubeVersion | None:
    """The first of ``versions`` that no longer serves ``api``; None when all serve it.

    The one removal rule for observed usage, shared by ``check``/``plan`` and by the gates the
    worker runs before and after each patch: the catalog decides removal (the apiserver's
    ``removed_release`` label is only informative), so an API the catalog does not list is
    never removed here.
    """
    record = lifecycle(api)
    if record is None:
        return None
    return next((v for v in versions if v.minor_key >= record.removed_in), None)


def observed_findings(cluster: Cluster, versions: Sequence[KubeVersion]) -> list[Finding]:
    """Findings for the API usage seen on ``cluster``, one per usage (API and source).

    A usage of an API the catalog removes at one of ``versions`` breaks at the first such
    version; one the path still serves everywhere is an early warning at the path's last
    version, with the catalog's removal release. A usage the catalog does not list is an early
    warning too, with the release the apiserver reported: the catalog decides removal, and the
    apiserver's label alone never blocks. With no versions the current version is checked.
    """
    status = cluster.workload_cluster
    if status is None or not status.api_usage:
        return []
    current = cluster.control_plane.version
    to_check = tuple(versions) or (current,)
    out: list[Finding] = []
    for usage in status.api_usage:
        record = lifecycle(usage.api)
        if record is None:
            removed_in, replacement, breaks, broken = usage.removed_release, "", None, False
            detail = f"{usage.describe()}; not in the API catalog"
        else:
            removed_in, replacement = record.removed_in_text, record.replacement_api
            breaks = removed_at(usage.api, to_check)
            broken = removed_at(usage.api, (current,)) is not None
            detail = usage.describe()
        out.append(
            Finding(
                cluster=cluster.name,
                workload="",
                api=str(usage.api),
                removed_in=removed_in,
                replacement=replacement,
                version=to_check[-1] if breaks is None else breaks,
                already_broken=broken,
                source=usage.source,
                detail=detail,
                subject=usage.example,
                active=usage.active,
                early_warning=breaks is None,
            )
        )
    return out


def disruption_findings(cluster: Cluster, worker_steps: Sequence[KubeVersion]) -> list[Finding]:
    """Findings for the PodDisruptionBudgets that would stall ``cluster``'s worker rollout.

    Only a cluster whose workers roll (``worker_steps`` not empty) drains its Nodes, so only
    there does a PDB that allows no eviction stop the step; elsewhere it is nothing to report.
    """
    status = cluster.workload_cluster
    if status is None or not worker_steps:
        return []
    return [
        Finding(
            cluster=cluster.name,
            workload="",
            api="",
            removed_in="",
            replacement="",
            version=worker_steps[0],
            source="pdb",
            detail=blocker.describe(),
            subject=f"{blocker.namespace}/{blocker.name}",
        )
        for blocker in status.disruption_blockers
    ]


def check_fleet(
    snapshot: FleetSnapshot,
    planned: Mapping[str, Sequence[KubeVersion]],
    workers: Mapping[str, Sequence[KubeVersion]] | None = None,
) -> list[Finding]:
    """Findings for every cluster at every planned version: declared, observed, then pdb.

    Clusters absent from ``planned``, or with no steps, are checked at their current version.
    ``workers`` holds each cluster's worker steps, for the disruption check (none: no cluster's
    workers roll).
    """
    index = workloads_by_cluster(snapshot.workloads)
    rolls = workers or {}
    out: list[Finding] = []
    for cluster in snapshot.clusters:
        versions = planned.get(cluster.name, ())
        out.extend(cluster_findings(cluster, versions, index.get(cluster.name, ())))
        out.extend(observed_findings(cluster, versions))
        out.extend(disruption_findings(cluster, rolls.get(cluster.name, ())))
    return out
