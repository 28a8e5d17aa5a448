"""Activities of one cluster's rollout: preflight, patch, wait (heartbeating) and verify."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from temporalio import activity
from temporalio.exceptions import ApplicationError

from orchestrator.domain.taints import UPGRADING_TAINT_KEY
from orchestrator.domain.versions import KubeVersion, VersionError
from orchestrator.kube.backend.port import ClusterObservation, ClusterRef, ComponentObservation
from workflows.activities.base import ActivitiesBase
from workflows.activities.errors import NOT_FOUND, ROLLOUT_FAILED, VERSION_CONFLICT, invalid_input
from workflows.activities.heartbeat import heartbeating
from workflows.activities.usage_gate import control_plane_gate, drain_gate
from workflows.model import (
    PatchControlPlaneInput,
    PatchResult,
    PatchWorkersInput,
    PreflightInput,
    PreflightResult,
    VerifyInput,
    VerifyResult,
    WaitControlPlaneInput,
    WaitProgress,
    WaitResult,
    WaitWorkersInput,
)

# Seconds between two observations of one rollout at least, when woken sooner (``_poll``): one
# observation is five requests, and CAPI writes a finishing rollout's status several times.
MIN_OBSERVE_GAP = 1.0


def _same_version(a: str, b: str) -> bool:
    """Equal as Kubernetes versions (``1.33.5`` == ``v1.33.5``); text equality if unparseable."""
    try:
        return KubeVersion.parse(a) == KubeVersion.parse(b)
    except VersionError:
        return a == b


def _version_in(version: str, versions: Sequence[str]) -> bool:
    return any(_same_version(version, v) for v in versions)


def _component_done(obs: ComponentObservation, version: str, what: str) -> tuple[bool, str]:
    """(done, message) for a wait; raises on a version conflict or a terminal failure."""
    if not _same_version(obs.version, version):
        raise ApplicationError(
            f"{what} now declares {obs.version}, expected {version}: changed by someone else",
            type=VERSION_CONFLICT,
            non_retryable=True,
        )
    if obs.failure:
        raise ApplicationError(
            f"{what} rollout to {version} failed: {obs.failure}",
            type=ROLLOUT_FAILED,
            non_retryable=True,
        )
    if obs.rolled_out:
        return True, f"{what} rolled out {version}"
    return False, f"{what} rolling out {version}: {obs.message or 'in progress'}"


class RolloutActivities(ActivitiesBase):
    """Preflight a cluster, patch its control plane and workers, wait for and verify the rollout."""

    @activity.defn(name="preflight")
    async def preflight(self, input: PreflightInput) -> PreflightResult:
        """Is the cluster where the plan expects it, quiet, reachable, and not upgraded by another run?

        Versions already on the plan's path are accepted, so a cluster whose calibration resumes
        after a failure passes again.
        """
        obs = await self._observe(input.cluster)
        problems: list[str] = []
        if not obs.reachable:
            problems.append("the workload cluster's API server is not reachable")
        allowed = (input.control_plane_from, *input.planned_versions)
        cp = obs.control_plane
        if not _version_in(cp.version, allowed):
            problems.append(
                f"control plane declares {cp.version}; the plan expects {input.control_plane_from}"
            )
        elif not cp.rolled_out:
            problems.append(
                f"control plane is still rolling out {cp.version}: {cp.message or 'in progress'}"
            )
        for name, expected in input.pools:
            pool = obs.pool(name)
            if pool is None:
                problems.append(f"MachineDeployment {name} not found")
            elif not _version_in(pool.version, (str(expected), *input.planned_versions)):
                problems.append(
                    f"MachineDeployment {name} declares {pool.version}; the plan expects {expected}"
                )
            elif not pool.rolled_out:
                problems.append(f"MachineDeployment {name} is still rolling out")
        for taint in obs.taints:
            if taint.key == UPGRADING_TAINT_KEY and taint.value not in ("", input.calibration_id):
                problems.append(f"cluster is being upgraded by calibration {taint.value}")
        return PreflightResult(not problems, tuple(problems))

    @activity.defn(name="patch_control_plane")
    async def patch_control_plane(self, input: PatchControlPlaneInput) -> PatchResult:
        """Declare the control plane's next version, unless this step already did.

        Before the patch, the gate refuses the step while an API it removes is still in use
        (``usage_gate``); a step already applied is not gated again.
        """
        obs = await self._observe(input.cluster)
        declared = obs.control_plane.version
        if _same_version(declared, input.to_version):
            return PatchResult(already=("controlPlane",))
        if not _same_version(declared, input.from_version):
            raise ApplicationError(
                f"control plane declares {declared}, expected {input.from_version} before "
                f"step {input.step_id}",
                type=VERSION_CONFLICT,
                non_retryable=True,
            )
        warnings = await control_plane_gate(
            self._backend,
            input.cluster,
            input.from_version,
            input.to_version,
            window=input.observe_window_seconds,
            mode=input.on_observed_usage,
        )
        await self._backend.set_control_plane_version(
            input.cluster, input.to_version, input.step_id
        )
        return PatchResult(applied=("controlPlane",), warnings=warnings)

    async def _poll(
        self,
        cluster: ClusterRef,
        poll_seconds: float,
        what: str,
        judge: Callable[[ClusterObservation], tuple[bool, str]],
    ) -> WaitResult:
        """Observe ``cluster`` until ``judge`` says done, heartbeating (``heartbeating``).

        On every poll's answer, and while a poll waits on the API server. Between two
        observations the wait sleeps up to ``poll_seconds``, or less when the backend wakes it
        (``FleetBackend.rollout_wakeups``: the worker's cache saw the control plane or a pool
        finish): the poll interval is the bound on a finished rollout's wait, not its mean.
        """
        polls = 0
        loop = asyncio.get_running_loop()
        async with (
            heartbeating(WaitProgress(0, f"observing {what}")) as beat,
            self._backend.rollout_wakeups(cluster) as wakeups,
        ):
            while True:
                started = loop.time()
                obs = await self._observe(cluster)
                polls += 1
                done, message = judge(obs)
                beat(WaitProgress(polls, message))
                if done:
                    return WaitResult(polls, message)
                if await wakeups.wait(poll_seconds):
                    # Woken: observe now, but not more often than MIN_OBSERVE_GAP (a burst of
                    # status writes is one wake-up, not one read each).
                    gap = min(MIN_OBSERVE_GAP, poll_seconds)
                    await asyncio.sleep(max(0.0, started + gap - loop.time()))

    @activity.defn(name="wait_control_plane")
    async def wait_control_plane(self, input: WaitControlPlaneInput) -> WaitResult:
        """Poll until the control plane rolled out the version (``_poll``)."""
        return await self._poll(
            input.cluster,
            input.poll_seconds,
            "the control plane",
            lambda obs: _component_done(obs.control_plane, input.version, "control plane"),
        )

    @activity.defn(name="patch_workers")
    async def patch_workers(self, input: PatchWorkersInput) -> PatchResult:
        """Declare the version on each pool, skipping pools this step already moved.

        Before the first pool it moves, the gate refuses the step while a PodDisruptionBudget
        allows no eviction (``usage_gate``).
        """
        if not input.pools:
            invalid_input(f"worker step {input.step_id} names no MachineDeployment")
        obs = await self._observe(input.cluster)
        applied: list[str] = []
        already: list[str] = []
        warnings: tuple[str, ...] = ()
        gated = False
        for name, expected in input.pools:
            pool = obs.pool(name)
            if pool is None:
                raise ApplicationError(
                    f"MachineDeployment {name} not found",
                    type=NOT_FOUND,
                    non_retryable=True,
                )
            if _same_version(pool.version, input.to_version):
                already.append(name)
                continue
            if not _same_version(pool.version, str(expected)):
                raise ApplicationError(
                    f"MachineDeployment {name} declares {pool.version}, expected "
                    f"{expected} before step {input.step_id}",
                    type=VERSION_CONFLICT,
                    non_retryable=True,
                )
            if not gated:  # once, before the first pool this call moves
                warnings = await drain_gate(
                    self._backend, input.cluster, input.on_disruption_blocker
                )
                gated = True
            await self._backend.set_pool_version(
                input.cluster, name, input.to_version, input.step_id
            )
            applied.append(name)
        return PatchResult(tuple(applied), tuple(already), warnings)

    @activity.defn(name="wait_workers")
    async def wait_workers(self, input: WaitWorkersInput) -> WaitResult:
        """Poll until every pool rolled out the version (``_poll``)."""

        def judge(obs: ClusterObservation) -> tuple[bool, str]:
            done = True
            messages: list[str] = []
            for name in input.pools:
                pool = obs.pool(name)
                if pool is None:
                    raise ApplicationError(
                        f"MachineDeployment {name} not found", type=NOT_FOUND, non_retryable=True
                    )
                pool_done, message = _component_done(
                    pool, input.version, f"MachineDeployment {name}"
                )
                done = done and pool_done
                messages.append(message)
            return done, "; ".join(messages)

        return await self._poll(input.cluster, input.poll_seconds, "the pools", judge)

    @activity.defn(name="verify")
    async def verify(self, input: VerifyInput) -> VerifyResult:
        """Compare what runs with what was declared: API server version, or node kubelets."""
        obs = await self._observe(input.cluster)
        problems: list[str] = []
        if not obs.reachable:
            return VerifyResult(False, ("the workload cluster's API server is not reachable",))
        if input.component == "controlPlane":
            running = obs.control_plane.versions
            if not running:
                problems.append("the API server reported no version")
            problems += [
                f"API server reports {v}, expected {input.version}"
                for v in running
                if not _same_version(v, input.version)
            ]
        else:
            for name in input.pools:
                pool = obs.pool(name)
                if pool is None:
                    problems.append(f"MachineDeployment {name} not found")
                    continue
                if not pool.versions:
                    problems.append(f"MachineDeployment {name} has no Nodes")
                wrong = [v for v in pool.versions if not _same_version(v, input.version)]
                if wrong:
                    problems.append(
                        f"MachineDeployment {name}: {len(wrong)} Node(s) run kubelet "
                        f"{', '.join(sorted(set(wrong)))}, expected {input.version}"
                    )
        return VerifyResult(not problems, tuple(problems))
