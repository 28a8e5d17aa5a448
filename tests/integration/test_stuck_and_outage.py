"""Faults during a real calibration: a rollout that never finishes, and a management-plane outage.

Both run a ``FleetCalibration`` on the real Temporal dev server with a worker on
``KubeFleetBackend`` (authenticated as the least-privilege ServiceAccount) against the local plane,
whose CAPI controllers do the rollouts. The faults are real process faults on that plane
(``LocalPlane.pause_component`` / ``stop_component``), never fakes:

* **Stuck rollout.** The kubeadm bootstrap provider (CABPK) is frozen with SIGSTOP before the run,
  so a new Machine can never be bootstrapped: KCP cannot even create the KubeadmConfig (CABPK's
  webhook does not answer) and no Machine at the target ever gets a Node. Three clusters roll out
  at once and their control-plane waits time out; each stays tainted and waits for a decision,
  and ``calibrator status`` names the cluster, the step and the reason. Then, with the real CLI:
  ``skip`` one (end state Skipped, left tainted), un-freeze CABPK and ``retry`` another (the step
  completes, the cluster converges and is untainted), and ``abort`` the run (the last cluster
  ends Aborted, left tainted; the run ends Aborted). docs/reliability/stuck-and-outage.md.
* **Management-plane outage.** kube-apiserver is stopped for 60 s while two clusters' rollout
  waits run (their KubeadmControlPlanes carry CAPI's pause annotation meanwhile, so the rollouts
  cannot finish before the outage: it is inside the waits by construction, not by timing). After
  the restart the rollouts are released once every watch the managers held is back (client-go
  re-watches after a backoff; a controller on a stale cache can orphan a Machine). The waits ride
  it out: no step fails, the run completes, every step is written once, and the plane's other
  processes (the four managers, etcd, the watchdog) keep their pids.

A watcher reads every cluster once a second and counts *ungated* observations: a cluster seen
mid-rollout (its declared versions or its Machines not all at one version) without the upgrading
taint and ``calibrator.dev/schedulable=false``. There must be none.

The plane is shared by the whole session: every fault is undone in a ``finally`` and the test
ends by checking that the plane is healthy again.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest
from kubernetes import client
from kubernetes.dynamic import DynamicClient
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from orchestrator.domain.taints import (
    SCHEDULABLE_LABEL,
    TAINTS_ANNOTATION,
    UPGRADING_TAINT_KEY,
    decode_taints,
)
from orchestrator.kube import capi
from orchestrator.kube.client import api_client, apply_all, dynamic
from orchestrator.kube.templates import cluster_class_objects, cluster_objects
from orchestrator.localplane.plane import LocalPlane
from orchestrator.localplane.processes import alive
from testkit.capi_waits import fully_at_version, get, list_for_cluster, patch, wait_for
from testkit.worker_rbac import WorkerIdentity, grant_kubeconfig_reader, grant_plan_store
from testkit.workflow_harness import start_dev_server
from tests.orchestrator.kube.backend.recording_backend import RecordingKubeBackend
from workflows.client import (
    CalibrationHandle,
    ControlError,
    cluster_status,
    start_calibration,
    status,
)
from workflows.model import (
    CalibrationInput,
    CalibrationOptions,
    CalibrationProgress,
    ClusterState,
    Phase,
    StepState,
    Timeouts,
)
from workflows.worker import build_worker

pytestmark = [pytest.mark.integration, pytest.mark.slow]

T = TypeVar("T")
REPO = Path(__file__).resolve().parents[2]
START, TARGET = "v1.33.0", "v1.34.0"
MACHINES = 2  # 1 control-plane Machine + 1 worker (plain KubeadmControlPlane + MachineDeployment)
CREATE_TIMEOUT = 300
DELETE_TIMEOUT = 240
BOOTSTRAP = "kubeadm-bootstrap"  # the plane component frozen to make a rollout stuck
PAUSED = "cluster.x-k8s.io/paused"  # CAPI's pause annotation: holds the outage test's rollouts
APISERVER = "kube-apiserver"

STUCK_NS = "calibrator-stuck"
RETRY, SKIP, ABORT = "stuck-retry", "stuck-skip", "stuck-abort"
STUCK_CLUSTERS = (RETRY, SKIP, ABORT)
# A short rollout budget: the stuck waits time out after it, and it still leaves a real
# one-machine rollout (about 20 s idle) several times its time when the retried step runs.
STUCK_OPTIONS = CalibrationOptions(
    worker_concurrency=1,
    timeouts=Timeouts(
        activity_seconds=30, rollout_seconds=75, heartbeat_seconds=15, poll_seconds=2
    ),
)

OUTAGE_NS = "calibrator-outage"
OUTAGE_CLUSTERS = ("outage-a", "outage-b")
# The outage length. CALIBRATOR_OUTAGE_SECONDS=0 runs the same calibration without any
# fault (no outage, nothing frozen): the clean baseline of the wall-time ratio in the docs.
OUTAGE_SECONDS = float(os.environ.get("CALIBRATOR_OUTAGE_SECONDS", "60"))
OUTAGE_OPTIONS = CalibrationOptions(
    worker_concurrency=1,
    timeouts=Timeouts(
        activity_seconds=30, rollout_seconds=420, heartbeat_seconds=15, poll_seconds=2
    ),
)
RUN_TIMEOUT = 600
# Phases a run does not leave on its own: it waits for an operator (a decision on failed
# clusters, an approval, a resume), or it failed or was aborted.
STOPPED = (
    Phase.HALTED,
    Phase.AWAITING_DECISIONS,
    Phase.AWAITING_APPROVAL,
    Phase.PAUSED,
    Phase.FAILED,
    Phase.ABORTED,
)


def _strategy(env: str, failures: int) -> dict[str, Any]:
    """Every selected cluster in one wave (so they are stuck at once), ``failures`` allowed."""
    return {
        "apiVersion": "calibrator.dev/v1alpha1",
        "kind": "CalibrationStrategy",
        "stages": [{"name": env, "selector": {"matchLabels": {"env": env}}, "maxConcurrency": 3}],
        "maxFailures": failures,
    }


@pytest.fixture(scope="module")
def fault_fleet(dyn: DynamicClient, mgmt: client.ApiClient) -> Iterator[None]:
    """Both tests' clusters, created at START together (they become Available in parallel)."""
    namespaces = dyn.resources.get(api_version="v1", kind="Namespace")
    layout = ((STUCK_NS, STUCK_CLUSTERS, "stuck"), (OUTAGE_NS, OUTAGE_CLUSTERS, "outage"))
    for ns, names, env in layout:
        namespaces.create(body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        grant_kubeconfig_reader(mgmt, ns)
        grant_plan_store(mgmt, ns)
        apply_all(dyn, cluster_class_objects(ns))
        for name in names:
            apply_all(dyn, cluster_objects(name, ns, START, topology=False, labels={"env": env}))
    clusters = dyn.resources.get(api_version=capi.CLUSTER[0], kind=capi.CLUSTER[1])
    try:
        yield
    finally:
        for ns, names, _ in layout:
            for name in names:
                try:
                    clusters.delete(name=name, namespace=ns, _request_timeout=60)
                except Exception as err:
                    print(f"delete {ns}/{name}: {err}")
        wait_for(
            "fault-test clusters deleted",
            lambda: (
                not any(
                    clusters.get(namespace=ns, _request_timeout=60).to_dict()["items"]
                    for ns, _, _ in layout
                )
            ),
            DELETE_TIMEOUT,
        )


# --------------------------------------------------------------------------------------------
# Observing the fleet: the ungated-mid-rollout watcher and the gate of one cluster
# --------------------------------------------------------------------------------------------


def gate(dyn: DynamicClient, ns: str, name: str) -> tuple[bool, str]:
    """(upgrading taint present, value of the schedulable label) of one Cluster."""
    meta = get(dyn, capi.CLUSTER, ns, name)["metadata"]
    taints = decode_taints((meta.get("annotations") or {}).get(TAINTS_ANNOTATION))
    tainted = any(t.key == UPGRADING_TAINT_KEY for t in taints)
    return tainted, str((meta.get("labels") or {}).get(SCHEDULABLE_LABEL, ""))


def mid_rollout(dyn: DynamicClient, ns: str, name: str) -> str | None:
    """Why the cluster is mid-rollout (declared or running versions not all one), else None."""
    kcp_name = get(dyn, capi.CLUSTER, ns, name)["spec"]["controlPlaneRef"]["name"]
    declared = {str(get(dyn, capi.KUBEADM_CONTROL_PLANE, ns, kcp_name)["spec"]["version"])}
    declared |= {
        capi.md_version(md) for md in list_for_cluster(dyn, capi.MACHINE_DEPLOYMENT, ns, name)
    }
    machines = list_for_cluster(dyn, capi.MACHINE, ns, name)
    running = {str(m["spec"].get("version")) for m in machines}
    if len(declared | running) > 1 or len(machines) != MACHINES:
        return f"declared {sorted(declared)}, machines {sorted(running)} ({len(machines)})"
    return None


@dataclass
class Watch:
    """Once a second: every cluster seen mid-rollout, and those of them not gated."""

    dyn: DynamicClient
    clusters: tuple[tuple[str, str], ...]
    observations: int = 0
    mid: int = 0
    ungated: list[str] = field(default_factory=list)
    errors: int = 0
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        while not self.stop.is_set():
            for ns, name in self.clusters:
                try:
                    # The gate first: a gate read before a mid-rollout reading can only be older.
                    tainted, schedulable = gate(self.dyn, ns, name)
                    why = mid_rollout(self.dyn, ns, name)
                except Exception:  # the API server is down during the outage
                    self.errors += 1
                    continue
                self.observations += 1
                if why is not None:
                    self.mid += 1
                    if not tainted or schedulable != "false":
                        self.ungated.append(f"{name}: {why}; tainted={tainted} {schedulable=}")
            self.stop.wait(1.0)

    def __enter__(self) -> Watch:
        self._thread = threading.Thread(target=self.run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self._thread.join(timeout=60)


# --------------------------------------------------------------------------------------------
# Temporal: dev server, in-process worker, the real CLI
# --------------------------------------------------------------------------------------------


async def blocking(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run a blocking call (kube reads, process control) off the loop the worker runs on."""
    return await asyncio.to_thread(functools.partial(fn, *args, **kwargs))


async def until(
    what: str, check: Callable[[], Awaitable[T | None]], timeout: float, interval: float = 1.0
) -> T:
    """Poll an async ``check`` until it returns something truthy, or fail with the last value."""
    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        result = await check()
        if result:
            return result
        last = result
        await asyncio.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}; last: {last!r}")


def described(p: CalibrationProgress) -> str:
    """A run's state in one line: its phase and message, then each cluster's."""
    clusters = "; ".join(f"{c.name} {c.state} {c.message}" for c in p.clusters)
    return f"{p.phase} ({p.message}); {clusters}"


async def completed(
    temporal: Client, handle: CalibrationHandle, timeout: float
) -> CalibrationProgress:
    """The run's result; fails as soon as its ``progress`` query says it stopped (or on timeout).

    A run that halts or waits for an operator's decision never returns a result: awaiting only
    that would wait out pytest's bound and say nothing about why. The result is still awaited
    directly, so the run's measured wall time is not rounded up to a poll.
    """
    result = asyncio.ensure_future(handle.result())
    deadline = time.monotonic() + timeout
    try:
        while not result.done():
            p = await status(temporal, handle.id)
            if p.phase in STOPPED:
                raise AssertionError(f"the run stopped instead of completing: {described(p)}")
            if time.monotonic() > deadline:
                raise AssertionError(f"the run did not complete in {timeout:.0f}s: {described(p)}")
            await asyncio.wait({result}, timeout=2.0)
        return result.result()
    finally:
        result.cancel()  # a no-op once done; else nobody awaits it any more


def cli(address: str, *args: str) -> subprocess.CompletedProcess[str]:
    """The real ``calibrator`` CLI (this checkout's code) against the dev server."""
    return subprocess.run(
        [sys.executable, "-m", "orchestrator.cli.main", *args, "--address", address],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=REPO,
    )


async def run_cli(address: str, *args: str) -> subprocess.CompletedProcess[str]:
    proc = await blocking(cli, address, *args)
    assert proc.returncode == 0, (args, proc.stdout, proc.stderr)
    return proc


async def wait_attempts(temporal: Client, workflow_id: str) -> list[int]:
    """The attempt number of every rollout wait a child's history records (1 = no retry)."""
    history = await temporal.get_workflow_handle(workflow_id).fetch_history()
    waits = {
        e.event_id
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and e.activity_task_scheduled_event_attributes.activity_type.name.startswith("wait_")
    }
    return [
        e.activity_task_started_event_attributes.attempt
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
        and e.activity_task_started_event_attributes.scheduled_event_id in waits
    ]


def available(dyn: DynamicClient, mgmt: client.ApiClient, ns: str, names: tuple[str, ...]) -> None:
    for name in names:
        wait_for(
            f"{ns}/{name} Available at {START}",
            functools.partial(fully_at_version, dyn, mgmt, ns, name, START, MACHINES),
            CREATE_TIMEOUT,
        )


def plane_pids(plane: LocalPlane) -> dict[str, int | None]:
    return {c.name: c.pid for c in plane.status().components}


def watchdog_pid(plane: LocalPlane) -> int:
    pid = json.loads(plane.state_file.read_text()).get("watchdogPid")
    assert isinstance(pid, int) and alive(pid), "the plane's TTL watchdog is not running"
    return pid


def assert_plane_as_found(plane: LocalPlane, pids: dict[str, int | None], watchdog: int) -> None:
    """Healthy, the same processes (except a restarted API server), the watchdog still on."""
    after = plane.status()
    assert after.healthy, [(c.name, c.running, c.healthy) for c in after.components]
    now = {c.name: c.pid for c in after.components}
    assert {k: v for k, v in now.items() if k != APISERVER} == {
        k: v for k, v in pids.items() if k != APISERVER
    }, (pids, now)
    assert watchdog_pid(plane) == watchdog


# --------------------------------------------------------------------------------------------
# 4. Stuck rollout
# --------------------------------------------------------------------------------------------


@dataclass
class StuckReport:
    result: CalibrationProgress
    waiting: CalibrationProgress
    status_json: dict[str, Any]
    status_table: str
    acks: dict[str, str]
    gates: dict[str, tuple[bool, str]]
    times: dict[str, float]


async def _stuck_run(
    plane: LocalPlane, dyn: DynamicClient, backend: RecordingKubeBackend
) -> StuckReport:
    env = await start_dev_server()
    times: dict[str, float] = {}
    acks: dict[str, str] = {}
    try:
        address = env.client.service_client.config.target_host
        task_queue = f"stuck-{uuid.uuid4().hex[:8]}"
        async with build_worker(env.client, backend, task_queue=task_queue):
            began = time.monotonic()
            handle = await start_calibration(
                env.client,
                CalibrationInput(
                    target=TARGET,
                    strategy=_strategy("stuck", failures=len(STUCK_CLUSTERS)),
                    selector="env=stuck",
                    options=STUCK_OPTIONS,
                ),
                task_queue=task_queue,
            )
            cid = handle.id

            seen: list[str] = []

            async def all_waiting() -> CalibrationProgress | None:
                p = await status(env.client, cid)
                states = {c.name: c.state for c in p.clusters}
                ok = p.phase == Phase.AWAITING_DECISIONS and states == dict.fromkeys(
                    STUCK_CLUSTERS, ClusterState.WAITING_FOR_DECISION
                )
                seen[:] = [
                    f"{p.phase}: "
                    + "; ".join(f"{c.name} {c.state} {c.message}" for c in p.clusters)
                ]
                return p if ok else None

            try:
                waiting = await until(
                    "every stuck cluster waiting for a decision",
                    all_waiting,
                    STUCK_OPTIONS.timeouts.rollout_seconds + 180,
                    2.0,
                )
            except AssertionError as err:
                raise AssertionError(f"{err}; progress: {seen}") from None
            times["stuck"] = time.monotonic() - began
            gates = {n: await blocking(gate, dyn, STUCK_NS, n) for n in STUCK_CLUSTERS}
            status_json = json.loads((await run_cli(address, "status", cid, "-o", "json")).stdout)
            status_table = (await run_cli(address, "status", cid)).stdout

            # skip: the cluster ends Skipped and stays tainted (it was patched).
            acks["skip"] = (
                await run_cli(address, "skip", cid, "--cluster", SKIP, "--reason", "drill: skip")
            ).stdout

            async def settled(name: str, state: ClusterState) -> bool:
                return (await cluster_status(env.client, cid, name)).state == state

            await until(f"{SKIP} skipped", lambda: settled(SKIP, ClusterState.SKIPPED), 60)

            # The cause goes away (the bootstrap provider answers again); retry the step.
            await blocking(plane.resume_component, BOOTSTRAP)
            unstuck = time.monotonic()
            acks["retry"] = (
                await run_cli(address, "retry", cid, "--cluster", RETRY, "--reason", "drill: fixed")
            ).stdout
            await until(
                f"{RETRY} succeeded after the retry",
                lambda: settled(RETRY, ClusterState.SUCCEEDED),
                2 * STUCK_OPTIONS.timeouts.rollout_seconds + 60,
                2.0,
            )
            times["retry"] = time.monotonic() - unstuck

            # abort: the run stops; the cluster still waiting ends Aborted, tainted.
            acks["abort"] = (
                await run_cli(address, "abort", cid, "--reason", "drill: abort")
            ).stdout
            result = await asyncio.wait_for(handle.result(), 120)
            times["total"] = time.monotonic() - began
            return StuckReport(result, waiting, status_json, status_table, acks, gates, times)
    finally:
        await env.shutdown()


def test_stuck_rollout_waits_tainted_for_retry_skip_or_abort(
    plane: LocalPlane,
    fault_fleet: None,
    dyn: DynamicClient,
    mgmt: client.ApiClient,
    worker_identity: WorkerIdentity,
) -> None:
    available(dyn, mgmt, STUCK_NS, STUCK_CLUSTERS)
    pids, watchdog = plane_pids(plane), watchdog_pid(plane)
    backend = RecordingKubeBackend(worker_identity.client(), namespace=STUCK_NS)
    watcher_mgmt = api_client(plane.kubeconfig)
    watch = Watch(dynamic(watcher_mgmt), tuple((STUCK_NS, n) for n in STUCK_CLUSTERS))
    plane.pause_component(BOOTSTRAP)
    try:
        with watch:
            report = asyncio.run(_stuck_run(plane, dyn, backend))
    finally:
        plane.resume_component(BOOTSTRAP)  # idempotent: the plane is shared by every test
    print(f"\nstuck drill: {report.times}; watcher {watch.observations} observations, "
          f"{watch.mid} mid-rollout, {len(watch.ungated)} ungated; acks {report.acks}")  # fmt: skip
    print(report.status_table)

    # Every stuck cluster timed out in its control-plane wait, tainted, waiting for a decision.
    for c in report.waiting.clusters:
        step = c.steps[0]
        assert step.state == StepState.FAILED and step.activity == "wait", (c.name, step)
        assert c.tainted and c.touched, c
        assert "timed out (schedule-to-close timeout)" in c.message, c.message
        assert "last seen: control plane rolling out v1.34.0" in c.message, c.message
        assert c.message.startswith(step.description), (c.message, step.description)
    assert report.gates == dict.fromkeys(STUCK_CLUSTERS, (True, "false")), report.gates

    # `calibrator status -o json` and the table name the cluster, the step and the reason.
    doc = report.status_json
    assert doc["phase"] == Phase.AWAITING_DECISIONS.value, doc["phase"]
    rows = {c["name"]: c for c in doc["clusters"]}
    for name in STUCK_CLUSTERS:
        row = rows[name]
        assert row["state"] == ClusterState.WAITING_FOR_DECISION.value and row["tainted"], row
        failed = [s for s in row["steps"] if s["state"] == StepState.FAILED.value]
        assert len(failed) == 1 and "timed out" in failed[0]["message"], row["steps"]
        assert row["message"].startswith(failed[0]["description"]), row
        line = next(ln for ln in report.status_table.splitlines() if name in ln)
        assert "WaitingForDecision" in line and "timed out" in line, line
        assert "last seen" in report.status_table
    assert "AwaitingDecisions" in report.status_table

    # retry: the step completed after the cause was fixed; converged, untainted, schedulable.
    result = report.result
    assert result.phase == Phase.ABORTED, result.message
    end = {c.name: c for c in result.clusters}
    assert end[RETRY].state == ClusterState.SUCCEEDED and not end[RETRY].tainted, end[RETRY]
    assert end[RETRY].steps[0].attempts == 2, end[RETRY].steps
    assert all(s.state == StepState.SUCCEEDED for s in end[RETRY].steps)
    wait_for(
        f"{RETRY} at {TARGET}",
        functools.partial(fully_at_version, dyn, mgmt, STUCK_NS, RETRY, TARGET, MACHINES),
        60,
    )
    assert gate(dyn, STUCK_NS, RETRY) == (False, "true")
    # skip and abort: ended without finishing the plan, still tainted and unschedulable.
    assert end[SKIP].state == ClusterState.SKIPPED, end[SKIP]
    assert end[ABORT].state == ClusterState.ABORTED, end[ABORT]
    for name in (SKIP, ABORT):
        assert end[name].tainted and "left tainted" in end[name].message, end[name]
        assert gate(dyn, STUCK_NS, name) == (True, "false")
        assert [s.state for s in end[name].steps] == [StepState.FAILED, StepState.SKIPPED]

    # Each step written once: the retried patch found its version already declared.
    assert all(n == 1 for n in backend.patches.values()), backend.patches
    written = sorted((c, comp) for c, comp, _ in backend.patches)
    assert written == sorted(
        [(RETRY, "controlPlane"), (RETRY, f"{RETRY}-md-0"), (SKIP, "controlPlane"),
         (ABORT, "controlPlane")]
    ), written  # fmt: skip
    assert watch.observations and watch.mid, (watch.observations, watch.mid)
    assert not watch.ungated, watch.ungated
    assert_plane_as_found(plane, pids, watchdog)


# --------------------------------------------------------------------------------------------
# 5. Management-plane outage
# --------------------------------------------------------------------------------------------


@dataclass
class OutageReport:
    result: CalibrationProgress
    during: list[CalibrationProgress]
    attempts: dict[str, list[int]]
    wall: float
    down_seconds: float
    rewatch_seconds: float


def hold_rollouts(dyn: DynamicClient, hold: bool) -> None:
    """Pause (or release) the outage clusters' KubeadmControlPlanes with CAPI's own annotation.

    A paused KCP does not roll out the version the calibration declares, so the waits are still
    running when the API server goes away, whatever the machine's speed. A frozen process would
    not do here: it could not re-watch after the restart, and the test waits for every watch.
    """
    value = "" if hold else None
    for name in OUTAGE_CLUSTERS:
        kcp = get(dyn, capi.CLUSTER, OUTAGE_NS, name)["spec"]["controlPlaneRef"]["name"]
        patch(dyn, capi.KUBEADM_CONTROL_PLANE, OUTAGE_NS, kcp,
              {"metadata": {"annotations": {PAUSED: value}}})  # fmt: skip


async def _outage_run(
    plane: LocalPlane, dyn: DynamicClient, backend: RecordingKubeBackend
) -> OutageReport:
    env = await start_dev_server()
    during: list[CalibrationProgress] = []
    down_seconds = rewatch_seconds = 0.0
    try:
        task_queue = f"outage-{uuid.uuid4().hex[:8]}"
        async with build_worker(env.client, backend, task_queue=task_queue):
            began = time.monotonic()
            handle = await start_calibration(
                env.client,
                CalibrationInput(
                    target=TARGET,
                    strategy=_strategy("outage", failures=0),
                    selector="env=outage",
                    options=OUTAGE_OPTIONS,
                ),
                task_queue=task_queue,
            )
            cid = handle.id
            if OUTAGE_SECONDS > 0:

                async def waiting() -> bool:
                    p = await status(env.client, cid)
                    if p.phase in STOPPED:
                        raise AssertionError(f"run stopped before the outage: {described(p)}")
                    for name in OUTAGE_CLUSTERS:
                        try:
                            c = await cluster_status(env.client, cid, name)
                        except ControlError:  # its ClusterUpgrade has not started yet
                            return False
                        if not c.steps or c.steps[0].activity != "wait":
                            return False
                    return True

                # Both control-plane waits run (and cannot finish: their KCPs are paused), then
                # the API server goes away for OUTAGE_SECONDS.
                await until("both rollout waits running", waiting, 180)
                watches = await blocking(plane.apiserver_watches)
                await blocking(plane.stop_component, APISERVER)
                down = time.monotonic()
                while time.monotonic() - down < OUTAGE_SECONDS:
                    during.append(await status(env.client, cid))
                    await asyncio.sleep(
                        min(10.0, max(0.0, OUTAGE_SECONDS - (time.monotonic() - down)))
                    )
                await blocking(plane.start_component, APISERVER)
                down_seconds = time.monotonic() - down
                during.append(await status(env.client, cid))

                async def watches_back() -> bool:
                    now = await blocking(plane.apiserver_watches)
                    return all(now.get(k, 0) >= n for k, n in watches.items())

                # The managers re-watch after a client-go backoff (up to ~30 s, jittered): the
                # rollout resumes once every watch is back, so no controller acts on a stale
                # cache (KCP v1.13.4 then orphans a new Machine: LocalPlane.apiserver_watches).
                await until("every watch of the managers re-established", watches_back, 240)
                rewatch_seconds = time.monotonic() - down - down_seconds
                await blocking(hold_rollouts, dyn, False)
            result = await completed(env.client, handle, RUN_TIMEOUT)
            wall = time.monotonic() - began
            attempts = {
                name: await wait_attempts(env.client, f"{cid}/{name}") for name in OUTAGE_CLUSTERS
            }
            return OutageReport(result, during, attempts, wall, down_seconds, rewatch_seconds)
    finally:
        await env.shutdown()


def test_apiserver_outage_during_rollout_waits_fails_no_step(
    plane: LocalPlane,
    fault_fleet: None,
    dyn: DynamicClient,
    mgmt: client.ApiClient,
    worker_identity: WorkerIdentity,
) -> None:
    available(dyn, mgmt, OUTAGE_NS, OUTAGE_CLUSTERS)
    pids, watchdog = plane_pids(plane), watchdog_pid(plane)
    backend = RecordingKubeBackend(worker_identity.client(), namespace=OUTAGE_NS)
    watcher_mgmt = api_client(plane.kubeconfig)
    watch = Watch(dynamic(watcher_mgmt), tuple((OUTAGE_NS, n) for n in OUTAGE_CLUSTERS))
    if OUTAGE_SECONDS > 0:
        hold_rollouts(dyn, True)
    try:
        with watch:
            report = asyncio.run(_outage_run(plane, dyn, backend))
    finally:
        # Undo every fault whatever happened: the plane is shared by the whole session.
        if not alive(plane_pids(plane)[APISERVER] or 0):
            plane.start_component(APISERVER)
        hold_rollouts(dyn, False)
    print(
        f"\noutage drill: API server down {report.down_seconds:.1f}s (stop -> ready again), "
        f"watches back {report.rewatch_seconds:.1f}s later; "
        f"run wall {report.wall:.1f}s; wait attempts {report.attempts}; watcher "
        f"{watch.observations} observations ({watch.errors} failed reads), {watch.mid} "
        f"mid-rollout, {len(watch.ungated)} ungated"
    )

    # Nothing failed while the API server was down, and the run completed.
    assert len(report.during) >= (2 if OUTAGE_SECONDS > 0 else 0), report.during
    for p in report.during:
        assert p.phase == Phase.RUNNING, (p.phase, p.message)
        for c in p.clusters:
            assert c.state == ClusterState.RUNNING, (c.name, c.state, c.message)
            assert all(s.state != StepState.FAILED for s in c.steps), c.steps
    result = report.result
    assert result.phase == Phase.COMPLETED, result.message
    for c in result.clusters:
        assert c.state == ClusterState.SUCCEEDED, (c.name, c.message)
        assert all(s.state == StepState.SUCCEEDED and s.attempts == 1 for s in c.steps), c.steps
    for name in OUTAGE_CLUSTERS:
        wait_for(
            f"{name} at {TARGET}",
            functools.partial(fully_at_version, dyn, mgmt, OUTAGE_NS, name, TARGET, MACHINES),
            60,
        )
        assert gate(dyn, OUTAGE_NS, name) == (False, "true")
    assert all(n == 1 for n in backend.patches.values()), backend.patches
    assert len(backend.patches) == 2 * len(OUTAGE_CLUSTERS), backend.patches
    assert not watch.ungated, watch.ungated
    assert_plane_as_found(plane, pids, watchdog)
    if OUTAGE_SECONDS > 0:
        assert plane_pids(plane)[APISERVER] != pids[APISERVER]  # it really was restarted
