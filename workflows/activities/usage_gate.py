"""The gates a step passes before its patch (issue 27): APIs in use that it removes, stuck drains.

Declared APIs (FleetWorkload ``spec.apis``) are checked when the calibration is planned; these
gates look at the cluster itself, just before the patch that would break it:

- **control-plane step**: the APIs each apiserver instance was asked for, and the stored objects
  last written at a deprecated version. The look is folded into the record on the Cluster
  (``record_usage``) before the patch, because KCP replaces the apiserver processes whose
  counters hold it. When requests to an API the step removes were counted, the apiservers are
  read again ``window`` seconds later: a counter that grew in between is a client still calling
  (active); one that did not is quiet (the client stopped: reported, never blocking). A client
  that calls less often than the window is reported quiet at that moment; the stored-object
  scan still sees what it wrote. So ``calibrator retry`` after the client was stopped and its
  objects migrated lets the step go.
- **worker step** (and already the control-plane step, so a cluster is refused before it starts
  rather than with its control plane moved and its workers stuck): PodDisruptionBudgets that
  allow no eviction; draining a node that runs their pods would wait until the rollout's
  timeout.

The gates act on what was seen, as ``calibrator plan`` does: a look that is partial (an apiserver
instance that did not answer, an apiserver that serves no /metrics) is returned as a warning that
names what could not be seen, never taken for a clean look and never a block by itself
(``calibrator check`` answers such a cluster as partial, exit 1). In ``warn`` mode (the
strategy's choice) the findings too are returned as warnings and the step goes on. The child
shows the warnings on its step.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import UTC, datetime

from temporalio import activity
from temporalio.exceptions import ApplicationError

from orchestrator.domain.compatibility import removed_at
from orchestrator.domain.observed import ApiUsage
from orchestrator.domain.versions import KubeVersion
from orchestrator.kube.backend.port import ClusterRef, FleetBackend
from workflows.activities.errors import STEP_BLOCKED

BLOCK = "block"
WARN = "warn"


def removed_by_step(
    usage: Sequence[ApiUsage], from_version: KubeVersion, to_version: KubeVersion
) -> list[ApiUsage]:
    """Usages of APIs served at ``from_version`` and gone at ``to_version`` (any activity)."""
    return [
        u
        for u in usage
        if removed_at(u.api, (to_version,)) is not None
        and removed_at(u.api, (from_version,)) is None
    ]


def _refuse(problems: Sequence[str], mode: str) -> tuple[str, ...]:
    if problems and mode != WARN:
        raise ApplicationError("; ".join(problems), type=STEP_BLOCKED, non_retryable=True)
    return tuple(problems)


async def control_plane_gate(
    backend: FleetBackend,
    cluster: ClusterRef,
    from_version: str,
    to_version: str,
    *,
    window: float,
    mode: str = BLOCK,
) -> tuple[str, ...]:
    """Refuse the step (STEP_BLOCKED) while an API it removes is still in use; the warnings."""
    start, end = KubeVersion.parse(from_version), KubeVersion.parse(to_version)
    now = datetime.now(UTC)
    read = await backend.read_usage(cluster, now)
    merged = await backend.record_usage(cluster, read.usage, now)
    # Only a request counter that is about to decide a block is worth the wait: a clean cluster
    # (and a stored-object finding, which the window cannot change) costs one look.
    counted = any(u.source == "metric" for u in removed_by_step(merged, start, end))
    if window > 0 and counted and not read.partial:
        activity.heartbeat("observing requests")
        await asyncio.sleep(window)
        now = datetime.now(UTC)
        read = await backend.read_usage(cluster, now)
        merged = await backend.record_usage(cluster, read.usage, now)
    problems: list[str] = []
    quiet: list[str] = []
    for u in removed_by_step(merged, start, end):
        text = f"step to {to_version} removes {u.api.group_version} {u.resource}: {u.describe()}"
        (problems if u.active else quiet).append(text)
    # A stuck drain is refused here too, before the cluster's first step: a control plane moved
    # to the new minor with workers that can never follow is the half-upgrade to avoid.
    problems += [b.describe() for b in read.blockers]
    return _refuse(problems, mode) + tuple(quiet) + _incomplete(cluster, read.partial)


def _incomplete(cluster: ClusterRef, partial: str) -> tuple[str, ...]:
    return (f"observation of {cluster.name} is incomplete: {partial}",) if partial else ()


async def drain_gate(
    backend: FleetBackend, cluster: ClusterRef, mode: str = BLOCK
) -> tuple[str, ...]:
    """Refuse a worker step (STEP_BLOCKED) while a PDB allows no eviction; the warnings."""
    read = await backend.read_usage(cluster, datetime.now(UTC), blockers_only=True)
    problems = [b.describe() for b in read.blockers]
    return _refuse(problems, mode) + _incomplete(cluster, read.partial)


async def observed_after_step(
    backend: FleetBackend, cluster: ClusterRef, version: KubeVersion
) -> tuple[str, ...]:
    """Look at the cluster after a step, record the look, and name the removed APIs still seen."""
    now = datetime.now(UTC)
    read = await backend.read_usage(cluster, now)
    merged = await backend.record_usage(cluster, read.usage, now)
    out = [
        f"{u.api.group_version} {u.resource} is gone at {version}: {u.describe()}"
        for u in merged
        if removed_at(u.api, (version,)) is not None
    ]
    return tuple(out) + _incomplete(cluster, read.partial)
