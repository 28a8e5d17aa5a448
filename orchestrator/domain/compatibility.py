"""Compatibility checks (pure): workloads whose APIs a planned version no longer serves.

Run before planning (to block or move) and again after every upgrade step (to confirm), so the
function takes explicit versions rather than a plan.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from orchestrator.domain.apicatalog import removed_apis
from orchestrator.domain.snapshot import Cluster, FleetSnapshot, Workload
from orchestrator.domain.versions import KubeVersion


@dataclass(frozen=True, slots=True)
class Finding:
    """A workload on a cluster that uses an API gone at ``version``.

    ``already_broken`` is set when the cluster's current version already lacks the API: the
    upgrade does not make it worse, so such a finding never blocks a plan.
    """

    cluster: str
    workload: str
    api: str
    removed_in: str
    replacement: str
    version: KubeVersion
    already_broken: bool = False

    def describe(self) -> str:
        """One line for tables and block reasons."""
        use = f"; use {self.replacement}" if self.replacement else "; no replacement"
        return f"{self.workload} uses {self.api}, removed in {self.removed_in}{use}"


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


def check_fleet(
    snapshot: FleetSnapshot, planned: Mapping[str, Sequence[KubeVersion]]
) -> list[Finding]:
    """Findings for every cluster at every planned version.

    Clusters absent from ``planned``, or with no steps, are checked at their current version.
    """
    index = workloads_by_cluster(snapshot.workloads)
    out: list[Finding] = []
    for cluster in snapshot.clusters:
        out.extend(
            cluster_findings(cluster, planned.get(cluster.name, ()), index.get(cluster.name, ()))
        )
    return out
