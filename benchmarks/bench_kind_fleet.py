"""A fleet of real CAPD clusters calibrated through the worker deployed in a kind management
cluster: the product as its users run it (issue 26, items 4-6).

Run by ``tools/e2e-kind.sh fleet`` (or ``run``) inside the stack's network namespace, with
``KUBECONFIG`` (the kind management cluster, CAPI as pods), ``DOCKER_HOST`` and
``TEMPORAL_ADDRESS`` set and the worker Deployment Ready (``tools/e2e-kind.sh worker``)::

    python3 -m benchmarks.bench_kind_fleet --clusters 6 --docker-state-dir DIR --json OUT

What it does, as a platform team would:

1. Creates ``--clusters`` CAPD clusters at once (``FLEET`` below: v1.34.12 and v1.35.8, managed
   topology from the docker ClusterClass and plain KubeadmControlPlane + MachineDeployment), each
   timed to Available.
2. Declares one FleetWorkload (two pause pods behind a PodDisruptionBudget, minAvailable 1),
   asks ``calibrator place`` where it goes, and deploys it there, as a GitOps tool would from the
   decision.
3. Runs ``calibrator calibrate --wait`` with a strategy of a canary, two stages and
   maxConcurrency 3; the worker pods do the work. Samplers read, every 2 s, the Clusters, KCPs,
   Machines and the FleetWorkload on the management cluster and the app's PDB on every workload
   cluster. Once a stage-one cluster is mid-step, the worker pod running its activity (Temporal's
   ``lastWorkerIdentity``) is deleted.
4. Checks, and reports in ``--json``: every node Ready at the target kubelet; the PDB never
   broken in any sample; each upgraded cluster tainted from before its first patch until its
   last step ended and untainted after; a placement written after every step; no step done twice
   (each step once in the run's record and exactly one new Machine per old one); the deleted pod
   replaced and the run converged; the Temporal UI's API serving the run with its search
   attributes; CoreDNS Ready at the new minor on the topology clusters.

Figures: creation times, per-step times, wall against the ideal (the sum over waves of the
slowest cluster's steps), the worker pods' CPU and memory (``crictl stats`` in the management
node), each node container's memory. Exit 0 only when every check held.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes import client
from temporalio.client import Client

from benchmarks.bench_capd_capacity import container_stats
from benchmarks.bench_capd_docker import CNI_LABEL, NS, observe, prepare_on
from orchestrator.domain.taints import TAINTS_ANNOTATION, UPGRADING_TAINT_KEY, decode_taints
from orchestrator.kube import capi, workload
from orchestrator.kube.client import RequestPolicy, api_client, apply_all, dynamic
from orchestrator.kube.templates import cluster_objects
from orchestrator.localplane.components import REPO_ROOT
from orchestrator.localplane.dockerapi import load_archive
from orchestrator.localplane.dockerengine import DockerEngine
from testkit.workload_objects import (
    APP,
    APP_NS,
    COREDNS_TARGET_IMAGE,
    MIN_AVAILABLE,
    REPLICAS,
    app_objects,
)
from workflows.client import status
from workflows.model import ClusterState, Phase, StepState
from workflows.payloads import DATA_CONVERTER

START, TARGET = "v1.34.12", "v1.35.8"
WORKER_NS, WORKER_LABEL = "calibrator-system", "app.kubernetes.io/component=worker"
SAMPLE_REQUESTS = RequestPolicy(timeout=5.0, attempts=1)
SAMPLE_EVERY = 2.0


@dataclass(frozen=True)
class Member:
    """One cluster of the fleet: its topology, starting version and wave."""

    name: str
    topology: bool
    version: str
    wave: str  # canary | one | two


# In order: the first N are the fleet of --clusters N. Two minors, both shapes, three upgrading
# clusters in stage one (maxConcurrency 3 is reached), one cluster already at the target.
FLEET = (
    Member("k1", True, START, "canary"),
    Member("k2", True, START, "one"),
    Member("k3", False, START, "one"),
    Member("k4", True, START, "one"),
    Member("k5", False, START, "two"),
    Member("k6", True, TARGET, "two"),
    Member("k7", False, TARGET, "two"),
    Member("k8", True, START, "two"),
)
WAVES = ("canary", "one", "two")


def strategy_yaml(members: list[Member]) -> str:
    """The strategy: canary (1 cluster), stage one and stage two (maxConcurrency 3 each), short
    soaks. Both stages are always there (a strategy needs at least one; with one cluster, in CI,
    they select nothing and the canary is the whole run)."""
    lines = [
        "apiVersion: calibrator.dev/v1alpha1",
        "kind: CalibrationStrategy",
        "canary:",
        '  selector: {matchLabels: {calibrator.dev/canary: "true"}}',
        "  maxClusters: 1",
        "  soak: 20s",
    ]
    del members  # the same strategy for every fleet size: the labels decide
    lines.append("stages:")
    for wave in ("one", "two"):
        lines += [
            f"- name: stage-{wave}",
            f'  selector: {{matchLabels: {{calibrator.dev/e2e-wave: "{wave}"}}}}',
            "  maxConcurrency: 3",
            "  soak: 20s",
        ]
    lines.append("maxFailures: 0")
    return "\n".join(lines) + "\n"


def labels_of(m: Member) -> dict[str, str]:
    labels = {**CNI_LABEL, "calibrator.dev/e2e-wave": m.wave}
    if m.wave == "canary":
        labels["calibrator.dev/canary"] = "true"
    return labels


def log(message: str) -> None:
    print(f"[kind-fleet {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# 1. The fleet -----------------------------------------------------------------------------------


def create_fleet(
    engine: DockerEngine, mgmt: Any, dyn: Any, members: list[Member], timeout: float
) -> dict[str, dict[str, Any]]:
    """Apply every cluster at once; per cluster, the seconds at which each milestone was seen."""
    began = time.monotonic()
    for m in members:
        apply_all(
            dyn,
            cluster_objects(
                m.name, NS, m.version, backend="docker", labels=labels_of(m), topology=m.topology
            ),
        )
    times: dict[str, dict[str, float]] = {m.name: {} for m in members}
    pending = {m.name for m in members}
    while pending and time.monotonic() - began < timeout:
        for name in sorted(pending):
            try:
                seen = observe(dyn, mgmt, engine.socket, name)
            except Exception as err:  # a young cluster: not yet
                log(f"{name}: poll failed: {type(err).__name__}")
                continue
            now = round(time.monotonic() - began, 1)
            for key, ok in seen.items():
                if ok and key not in times[name]:
                    times[name][key] = now
            if all(seen.values()):
                pending.discard(name)
                log(f"{name}: Available at {now} s")
        time.sleep(2.0)
    if pending:
        raise RuntimeError(f"clusters not Available within {timeout:.0f} s: {sorted(pending)}")
    return {
        name: {"seconds": t, "available": t.get("cluster_available")} for name, t in times.items()
    }


# 2. The application, placed by the calibrator ---------------------------------------------------


def fleet_workload() -> dict[str, Any]:
    return {
        "apiVersion": "calibrator.dev/v1alpha1",
        "kind": "FleetWorkload",
        "metadata": {"name": APP, "namespace": NS},
        "spec": {
            "apis": ["apps/v1/Deployment", "policy/v1/PodDisruptionBudget"],
            "replicas": REPLICAS,
            "placement": {"clusterAffinity": {"matchLabels": dict(CNI_LABEL)}},
        },
    }


def calibrator(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """The CLI as a user runs it (here from the repository: ``python3 -m``)."""
    return subprocess.run(
        [sys.executable, "-m", "orchestrator.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        cwd=REPO_ROOT,
    )


def placed_clusters(doc: Any) -> list[str]:
    """The clusters ``place -o json`` gives the app (with replicas)."""
    for entry in doc["decisions"]:
        if entry["workload"] == f"{NS}/{APP}":
            return sorted(c["name"] for c in entry["clusters"] if c["replicas"] > 0)
    raise RuntimeError(f"no decision for {NS}/{APP} in place -o json: {json.dumps(doc)[:2000]}")


def deploy_app(mgmt: Any, names: list[str], timeout: float) -> None:
    for name in names:
        wl = workload.workload_client(mgmt, NS, name)
        deployment, pdb = app_objects()
        try:
            client.AppsV1Api(wl).create_namespaced_deployment(APP_NS, deployment)
            client.PolicyV1Api(wl).create_namespaced_pod_disruption_budget(APP_NS, pdb)
        except client.ApiException as err:  # a second run over the same fleet
            if err.status != 409:
                raise
    deadline = time.monotonic() + timeout
    for name in names:
        wl = workload.workload_client(mgmt, NS, name)
        while True:
            dep: Any = client.AppsV1Api(wl).read_namespaced_deployment(APP, APP_NS)
            if (dep.status.available_replicas or 0) == REPLICAS:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"{name}: the app not Available within {timeout:.0f} s")
            time.sleep(2.0)


# 3. Samplers ------------------------------------------------------------------------------------


@dataclass
class MgmtSample:
    at: float
    tainted: dict[str, bool] = field(default_factory=dict)
    declared: dict[str, str] = field(default_factory=dict)  # topology or KCP version
    machines: dict[str, set[str]] = field(default_factory=dict)
    placement_reason: str = ""


@dataclass
class AppSample:
    at: float
    cluster: str
    available: int
    pdb_healthy: int
    pdb_desired: int


class Samplers:
    """Threads that sample the management cluster and each workload cluster until stopped."""

    def __init__(self, app_clusters: list[str]) -> None:
        # Each thread makes its own clients (from KUBECONFIG): the kubernetes client's ApiClient
        # is not shared across threads here.
        self.app_clusters = app_clusters
        self.t0 = time.monotonic()
        self.stop = threading.Event()
        self.mgmt_samples: list[MgmtSample] = []
        self.app_samples: list[AppSample] = []
        self.misses: dict[str, int] = {}
        self.threads = [threading.Thread(target=self._mgmt, daemon=True)] + [
            threading.Thread(target=self._app, args=(name,), daemon=True) for name in app_clusters
        ]

    def now(self) -> float:
        return round(time.monotonic() - self.t0, 1)

    def start(self) -> None:
        for t in self.threads:
            t.start()

    def finish(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(timeout=30)

    def _mgmt(self) -> None:
        dyn = dynamic(api_client(os.environ["KUBECONFIG"]))
        res = {k: dyn.resources.get(api_version=k[0], kind=k[1]) for k in (
            capi.CLUSTER, capi.KUBEADM_CONTROL_PLANE, capi.MACHINE)}  # fmt: skip
        fw = dyn.resources.get(api_version="calibrator.dev/v1alpha1", kind="FleetWorkload")
        while not self.stop.is_set():
            s = MgmtSample(self.now())
            try:
                for c in res[capi.CLUSTER].get(namespace=NS).to_dict()["items"]:
                    name = c["metadata"]["name"]
                    text = (c["metadata"].get("annotations") or {}).get(TAINTS_ANNOTATION)
                    s.tainted[name] = any(t.key == UPGRADING_TAINT_KEY for t in decode_taints(text))
                    topo = (c.get("spec") or {}).get("topology")
                    if topo:
                        s.declared[name] = str(topo.get("version"))
                for k in res[capi.KUBEADM_CONTROL_PLANE].get(namespace=NS).to_dict()["items"]:
                    owner = (k["metadata"].get("labels") or {}).get(capi.CLUSTER_NAME_LABEL, "")
                    if owner and owner not in s.declared:
                        s.declared[owner] = str(k["spec"]["version"])
                for m in res[capi.MACHINE].get(namespace=NS).to_dict()["items"]:
                    owner = m["spec"]["clusterName"]
                    s.machines.setdefault(owner, set()).add(m["metadata"]["name"])
                st = fw.get(name=APP, namespace=NS).to_dict().get("status") or {}
                s.placement_reason = str(st.get("reason") or "")
                self.mgmt_samples.append(s)
            except Exception as err:
                self.misses["management"] = self.misses.get("management", 0) + 1
                log(f"sample of the management cluster failed: {type(err).__name__}: {err}")
            self.stop.wait(SAMPLE_EVERY)

    def _app(self, name: str) -> None:
        mgmt = api_client(os.environ["KUBECONFIG"])
        wl = workload.workload_client(mgmt, NS, name, SAMPLE_REQUESTS)
        while not self.stop.is_set():
            at = self.now()
            try:
                dep: Any = client.AppsV1Api(wl).read_namespaced_deployment(APP, APP_NS)
                pdb: Any = client.PolicyV1Api(wl).read_namespaced_pod_disruption_budget(APP, APP_NS)
                self.app_samples.append(
                    AppSample(
                        at,
                        name,
                        dep.status.available_replicas or 0,
                        pdb.status.current_healthy or 0,
                        pdb.status.desired_healthy or 0,
                    )
                )
            except Exception:  # the API server moves with the control plane: no sample then
                self.misses[name] = self.misses.get(name, 0) + 1
            self.stop.wait(SAMPLE_EVERY)


# 4. The calibration through the worker pods -----------------------------------------------------


def worker_pods(core: client.CoreV1Api) -> dict[str, Any]:
    pods: Any = core.list_namespaced_pod(WORKER_NS, label_selector=WORKER_LABEL)
    return {p.metadata.name: p for p in pods.items if not p.metadata.deletion_timestamp}


def pod_ready(pod: Any) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])


async def busy_worker(temporal: Client) -> str | None:
    """The pod (hostname in the worker identity ``pid@host``) running a pending activity of a
    running ClusterUpgrade, if any."""
    async for wf in temporal.list_workflows(
        'WorkflowType="ClusterUpgrade" AND ExecutionStatus="Running"'
    ):
        desc = await temporal.get_workflow_handle(wf.id, run_id=wf.run_id).describe()
        for act in desc.raw_description.pending_activities:
            identity = act.last_worker_identity
            if identity and "@" in identity:
                return identity.split("@", 1)[1]
    return None


def deletion_stage(members: list[Member]) -> str:
    """The stage during which one worker pod is deleted: stage one when it upgrades a cluster."""
    return (
        "stage-one" if any(m.wave == "one" and m.version != TARGET for m in members) else "canary"
    )


async def activity_record(temporal: Client, workflow_id: str) -> dict[str, Any]:
    """What one ClusterUpgrade's history says its worker did: the activities that completed, in
    order, and how many attempts were scheduled in all (a retry after a pod's death shows here)."""
    scheduled: dict[int, str] = {}
    completed: list[str] = []
    attempts = 0
    async for event in temporal.get_workflow_handle(workflow_id).fetch_history_events():
        if event.HasField("activity_task_scheduled_event_attributes"):
            attrs = event.activity_task_scheduled_event_attributes
            scheduled[event.event_id] = attrs.activity_type.name
        elif event.HasField("activity_task_started_event_attributes"):
            started = event.activity_task_started_event_attributes
            attempts = max(attempts, started.attempt)
        elif event.HasField("activity_task_completed_event_attributes"):
            done = event.activity_task_completed_event_attributes
            completed.append(scheduled.get(done.scheduled_event_id, "?"))
    return {"completed": completed, "scheduled": len(scheduled), "maxAttempt": attempts}


async def calibrate(
    members: list[Member], samplers: Samplers, state: Path, timeout: float
) -> dict[str, Any]:
    """``calibrate --wait`` in a subprocess; meanwhile record the run's progress and delete the
    busy worker pod once a stage-one cluster is mid-step."""
    strategy = state / "strategy.yaml"
    strategy.write_text(strategy_yaml(members))
    temporal = await Client.connect(
        os.environ.get("TEMPORAL_ADDRESS", "127.0.0.1:7233"), data_converter=DATA_CONVERTER
    )
    core = client.CoreV1Api(api_client(os.environ["KUBECONFIG"]))
    began = time.monotonic()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "orchestrator.cli.main", "calibrate", "--target", TARGET,
        "--strategy", str(strategy), "--wait", "-o", "json",
        cwd=REPO_ROOT, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    communicate = asyncio.ensure_future(proc.communicate())
    calibration_id = ""
    steps: dict[str, dict[str, Any]] = {}  # step id -> what the run recorded, last seen
    clusters: dict[str, dict[str, Any]] = {}
    deleted: dict[str, Any] = {}
    # The pod goes while stage one's clusters are mid-step (three at once in the full fleet); in
    # a fleet of the canary alone (CI), while the canary is.
    victim_stage = deletion_stage(members)
    last_phase = ""
    while not communicate.done():
        await asyncio.wait({communicate}, timeout=5)
        if time.monotonic() - began > timeout:
            proc.kill()
            raise RuntimeError(f"calibrate --wait still running after {timeout:.0f} s")
        if not calibration_id:
            async for wf in temporal.list_workflows('WorkflowType="FleetCalibration"'):
                if wf.start_time.timestamp() >= time.time() - (time.monotonic() - began) - 60:
                    calibration_id = wf.id
                    break
            continue
        try:
            progress = await status(temporal, calibration_id)
        except Exception as err:
            log(f"status: {type(err).__name__}: {err}")
            continue
        line = f"{progress.phase} " + "; ".join(
            f"{c.name} {c.state} {c.message[:60]}" for c in progress.clusters
        )
        if line != last_phase:
            log(f"{time.monotonic() - began:6.0f}s {line}")
            last_phase = line
        for c in progress.clusters:
            clusters[c.name] = {"stage": c.stage, "state": str(c.state), "from": c.from_version}
            for s in c.steps:
                steps[s.step_id] = {
                    "cluster": c.name,
                    "description": s.description,
                    "state": str(s.state),
                    "attempts": s.attempts,
                    "started": s.started_at.timestamp() if s.started_at else None,
                    "finished": s.finished_at.timestamp() if s.finished_at else None,
                }
        if not deleted:
            running_one = [
                c.name
                for c in progress.clusters
                if c.stage == victim_stage and any(s.state == StepState.RUNNING for s in c.steps)
            ]
            if running_one:
                host = await busy_worker(temporal)
                pods = worker_pods(core)
                victim = host if host in pods else sorted(pods)[0]
                core.delete_namespaced_pod(victim, WORKER_NS)
                deleted = {
                    "pod": victim,
                    "busy": host == victim,
                    "at": samplers.now(),
                    "clustersMidStep": running_one,
                }
                log(f"deleted worker pod {victim} (running an activity: {host == victim})")
    out, stderr = communicate.result()
    wall = round(time.monotonic() - began, 1)
    doc: Any = None
    try:
        doc = json.loads(out)
    except ValueError:
        doc = {"stdout": out[-4000:]}
    final = await status(temporal, calibration_id) if calibration_id else None
    # Only clusters that were upgraded have a ClusterUpgrade child (one already at the target is
    # UpToDate in the parent's record and starts none).
    histories = {
        m.name: await activity_record(temporal, f"{calibration_id}/{m.name}")
        for m in members
        if calibration_id and m.version != TARGET
    }
    return {
        "histories": histories,
        "exitCode": proc.returncode,
        "stderr": stderr.decode()[-4000:],
        "document": doc,
        "calibrationId": calibration_id,
        "wall": wall,
        "began": time.time() - (time.monotonic() - began),
        "phase": str(final.phase) if final else "",
        "counts": dict(final.counts) if final else {},
        "clusters": clusters,
        "steps": steps,
        "deleted": deleted,
    }


# 5. Checks and figures --------------------------------------------------------------------------


def worker_stats(node: str) -> dict[str, Any]:
    """CPU seconds and working-set memory of each worker container, from the management node's
    container runtime (there is no metrics-server)."""
    out = subprocess.run(
        ["docker", "exec", node, "crictl", "stats", "-o", "json",
         "--label", "io.kubernetes.container.name=worker"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    if out.returncode != 0:
        return {"error": out.stderr.strip()[-300:]}
    stats: dict[str, Any] = {}
    for s in json.loads(out.stdout).get("stats") or []:
        pod = s["attributes"]["labels"].get("io.kubernetes.pod.name", "?")
        stats[pod] = {
            "cpuSeconds": round(int(s["cpu"]["usageCoreNanoSeconds"]["value"]) / 1e9, 1),
            "workingSetMiB": round(int(s["memory"]["workingSetBytes"]["value"]) / 2**20, 1),
        }
    return stats


def ui_shows(ui: str, calibration_id: str) -> dict[str, Any]:
    """The Temporal UI's own HTTP API (what its pages read) for the run."""
    url = f"{ui}/api/v1/namespaces/default/workflows/{urllib.parse.quote(calibration_id)}"
    with urllib.request.urlopen(url, timeout=30) as resp:
        body = json.loads(resp.read())
    info = body.get("workflowExecutionInfo") or {}
    attrs = (info.get("searchAttributes") or {}).get("indexedFields") or {}
    return {"type": (info.get("type") or {}).get("name"), "status": info.get("status"),
            "searchAttributes": sorted(attrs)}  # fmt: skip


def check_all(  # noqa: PLR0917 - one call site, every input a distinct thing
    members: list[Member],
    mgmt: Any,
    dyn: Any,
    samplers: Samplers,
    run: dict[str, Any],
    before: dict[str, set[str]],
    ui: dict[str, Any],
) -> dict[str, Any]:
    checks: dict[str, Any] = {}
    upgraded = [m.name for m in members if m.version != TARGET]

    ok = run["exitCode"] == 0 and run["phase"] == Phase.COMPLETED
    ok = ok and all(
        run["counts"].get(s, 0) == 0 for s in (ClusterState.FAILED, ClusterState.SKIPPED)
    )
    checks["run_completed"] = {"ok": ok, "phase": run["phase"], "counts": run["counts"],
                               "exit": run["exitCode"]}  # fmt: skip

    nodes_ok: dict[str, Any] = {}
    for m in members:
        nodes = workload.nodes(workload.workload_client(mgmt, NS, m.name))
        nodes_ok[m.name] = sorted(
            (n, workload.kubelet_version(v), workload.node_ready(v)) for n, v in nodes.items()
        )
    checks["nodes_ready_at_target"] = {
        "ok": all(
            len(v) == 2 and all(k == TARGET and r for _, k, r in v) for v in nodes_ok.values()
        ),
        "nodes": nodes_ok,
    }

    after = {m.name: {x["metadata"]["name"] for x in _machines(dyn, m.name)} for m in members}
    seen: dict[str, set[str]] = {}
    for s in samplers.mgmt_samples:
        for name, ms in s.machines.items():
            seen.setdefault(name, set()).update(ms)
    replaced: dict[str, dict[str, Any]] = {
        name: {"before": len(before[name]), "after": len(after[name]),
               "everSeen": len(seen.get(name, set()) | before[name] | after[name]),
               "keptOld": sorted(before[name] & after[name])}
        for name in upgraded
    }  # fmt: skip
    step_ids = [sid for sid, s in run["steps"].items() if s["cluster"] in upgraded]
    twice = [sid for sid in step_ids if run["steps"][sid]["attempts"] > 1]
    patches = {name: [a for a in history(run, name) if a.startswith("patch_")] for name in upgraded}
    checks["no_step_done_twice"] = {
        "ok": all(r["everSeen"] == 2 * r["before"] and not r["keptOld"] for r in replaced.values())
        and all(p == ["patch_control_plane", "patch_workers"] for p in patches.values()),
        "machines": replaced,
        "patchesCompleted": patches,
        "stepsWithRetries": twice,  # an attempt retried after the pod died is not a second rollout
    }
    unchanged = {m.name: before[m.name] == after[m.name] for m in members if m.version == TARGET}
    checks["at_target_untouched"] = {"ok": all(unchanged.values()), "clusters": unchanged}

    low = [
        (s.at, s.cluster, s.available, s.pdb_healthy, s.pdb_desired)
        for s in samplers.app_samples
        if s.available < MIN_AVAILABLE or s.pdb_healthy < s.pdb_desired
    ]
    per = {n: sum(1 for s in samplers.app_samples if s.cluster == n) for n in samplers.app_clusters}
    checks["pdb_never_violated"] = {
        "ok": not low and all(per.values()),
        "violations": low[:20],
        "samples": per,
        "missed": dict(samplers.misses),
    }

    windows: dict[str, Any] = {}
    for name in upgraded:
        mine = [s for s in samplers.mgmt_samples if name in s.tainted]
        patched = [s.at for s in mine if s.declared.get(name) == TARGET]
        ends = [st["finished"] for st in run["steps"].values() if st["cluster"] == name]
        last_step = max((e for e in ends if e), default=None)
        if not patched or last_step is None:
            windows[name] = {"ok": False, "firstPatch": patched[:1], "lastStep": last_step}
            continue
        first_patch = patched[0]
        last = round(last_step - (time.time() - time.monotonic()) - samplers.t0, 1)
        during = [s for s in mine if first_patch <= s.at <= last]
        tainted_from = min((s.at for s in mine if s.tainted[name]), default=None)
        final = mine[-1].tainted[name] if mine else None
        windows[name] = {
            "ok": bool(during) and all(s.tainted[name] for s in during)
            and tainted_from is not None and tainted_from <= first_patch and final is False,
            "taintedFrom": tainted_from, "firstPatch": first_patch, "lastStepEnd": last,
            "samplesInWindow": len(during), "taintedAtEnd": final,
        }  # fmt: skip
    checks["taint_window"] = {"ok": all(w["ok"] for w in windows.values()), "clusters": windows}

    # Placement after every step: in each upgraded cluster's history a `replace` completes after
    # each patch's wait and before the next patch (and one before the first, one after the last).
    order: dict[str, Any] = {}
    for name in upgraded:
        kept = ("add_taint", "replace", "patch_control_plane", "patch_workers", "remove_taint")
        order[name] = [a for a in history(run, name) if a in kept]
    want = ["add_taint", "replace", "patch_control_plane", "replace", "patch_workers", "replace",
            "remove_taint", "replace"]  # fmt: skip
    reasons = sorted({s.placement_reason for s in samplers.mgmt_samples if s.placement_reason})
    decisions = (
        dyn.resources.get(api_version="calibrator.dev/v1alpha1", kind="PlacementDecision")
        .get(namespace=NS)
        .to_dict()["items"]
    )
    checks["placement_after_each_step"] = {
        "ok": bool(decisions) and all(o[-len(want) :] == want for o in order.values()),
        "order": order,
        "statusReasonsSeen": reasons,  # written only when the decision changes (stable placement)
        "placementDecisions": [d["metadata"]["name"] for d in decisions],
    }

    deleted = run["deleted"]
    pods = worker_pods(client.CoreV1Api(mgmt))
    checks["worker_pod_deleted_mid_run"] = {
        "ok": bool(deleted) and deleted["pod"] not in pods
        and len(pods) == 2 and all(map(pod_ready, pods.values())),
        "deleted": deleted, "podsAfter": sorted(pods),
    }  # fmt: skip

    checks["temporal_ui"] = {
        "ok": ui.get("type") == "FleetCalibration" and bool(ui.get("searchAttributes")),
        **ui,
    }

    dns: dict[str, Any] = {}
    for m in members:
        if not m.topology:
            continue
        dep: Any = client.AppsV1Api(
            workload.workload_client(mgmt, NS, m.name)
        ).read_namespaced_deployment("coredns", "kube-system")
        st = dep.status
        dns[m.name] = {
            "image": dep.spec.template.spec.containers[0].image,
            "ready": st.ready_replicas == dep.spec.replicas and not st.unavailable_replicas,
        }
    checks["coredns_on_topology_clusters"] = {
        "ok": all(d["image"] == COREDNS_TARGET_IMAGE and d["ready"] for d in dns.values()),
        "clusters": dns,
    }
    return checks


def memory_by_cluster(stats: dict[str, dict[str, Any]], names: list[str]) -> dict[str, Any]:
    """Memory of each workload cluster's containers (CAPD names them ``<cluster>-...``)."""
    return {
        name: round(
            sum(r.get("memMiB", 0) for c, r in stats.items() if c.startswith(f"{name}-")), 1
        )
        for name in names
    }


def history(run: dict[str, Any], name: str) -> list[str]:
    """The activities a cluster's child completed; none when the run never started it."""
    return list((run["histories"].get(name) or {}).get("completed") or [])


def _machines(dyn: Any, cluster: str) -> list[dict[str, Any]]:
    res = dyn.resources.get(api_version=capi.MACHINE[0], kind=capi.MACHINE[1])
    items = res.get(namespace=NS, label_selector=f"{capi.CLUSTER_NAME_LABEL}={cluster}")
    return [i.to_dict() for i in items.items]


def figures(members: list[Member], run: dict[str, Any]) -> dict[str, Any]:
    """Per-step seconds and the wall time against the ideal: the sum, over the waves, of the
    slowest member's own steps (what the rollouts alone would take with no overhead)."""
    per_step = {
        sid: round(s["finished"] - s["started"], 1)
        for sid, s in run["steps"].items()
        if s["started"] and s["finished"]
    }
    per_cluster: dict[str, float] = {}
    for sid, s in run["steps"].items():
        if sid in per_step:
            per_cluster[s["cluster"]] = per_cluster.get(s["cluster"], 0.0) + per_step[sid]
    ideal = sum(
        max((per_cluster.get(m.name, 0.0) for m in members if m.wave == w), default=0.0)
        for w in WAVES
    )
    return {
        "perStepSeconds": per_step,
        "perClusterStepSeconds": per_cluster,
        "idealSeconds": round(ideal, 1),
        "wallSeconds": run["wall"],
        "overheadRatio": round(run["wall"] / ideal, 2) if ideal else None,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--clusters", type=int, default=6, choices=range(1, len(FLEET) + 1))
    p.add_argument("--docker-state-dir", type=Path, required=True)
    p.add_argument("--kind-cluster", default="calibrator-mgmt")
    p.add_argument("--temporal-ui", default="http://127.0.0.1:8233")
    p.add_argument("--timeout", type=float, default=600, help="bound of each wait (s)")
    p.add_argument("--json", type=Path, help="write the report here")
    args = p.parse_args(argv)
    members = list(FLEET[: args.clusters])
    report: dict[str, Any] = {"clusters": [m.__dict__ for m in members], "target": TARGET}

    def save() -> None:
        if args.json:
            args.json.write_text(json.dumps(report, indent=2, default=sorted) + "\n")

    engine = DockerEngine(args.docker_state_dir)
    kind_set = subprocess.run(
        [str(REPO_ROOT / "tools" / "build.sh"), "--print-dir", "--set", "kind"],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout.strip()  # fmt: skip
    for version in sorted({m.version for m in members} | {TARGET}):
        loaded = load_archive(engine.socket, Path(kind_set) / "images" / f"node-{version}.tar")
        log(f"node image {version}: {'loaded' if loaded else 'already in the engine'}")
    prepared = prepare_on(engine, Path(os.environ["KUBECONFIG"]))
    _, mgmt, dyn = prepared
    node = f"{args.kind_cluster}-control-plane"
    stats_idle = worker_stats(node)

    t = time.monotonic()
    report["create"] = create_fleet(engine, mgmt, dyn, members, timeout=args.timeout * 2)
    report["createAllSeconds"] = round(time.monotonic() - t, 1)
    report["memoryBeforeRun"] = container_stats(engine)
    save()

    apply_all(dyn, [fleet_workload()])
    placed = calibrator("place", "-n", NS, "-o", "json", timeout=300)
    if placed.returncode not in (0, 1):
        raise RuntimeError(f"calibrator place failed: {placed.stderr[-2000:]}")
    app_clusters = placed_clusters(json.loads(placed.stdout))
    report["placedOn"] = app_clusters
    log(f"calibrator place: {APP} on {app_clusters}")
    deploy_app(mgmt, app_clusters, timeout=args.timeout)

    before = {m.name: {x["metadata"]["name"] for x in _machines(dyn, m.name)} for m in members}
    samplers = Samplers(app_clusters)
    samplers.start()
    stats_start = worker_stats(node)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            run = asyncio.run(calibrate(members, samplers, Path(tmp), timeout=args.timeout * 6))
        stats_end = worker_stats(node)
        time.sleep(2 * SAMPLE_EVERY + 1)  # one more sample of every cluster after the end
    finally:
        samplers.finish()
    report["run"] = run
    report["workerStats"] = {"idle": stats_idle, "start": stats_start, "end": stats_end}
    report["memoryAfterRun"] = container_stats(engine)
    report["memoryPerCluster"] = memory_by_cluster(
        report["memoryAfterRun"], [m.name for m in members]
    )
    report["figures"] = figures(members, run)
    save()
    try:
        ui = ui_shows(args.temporal_ui, run["calibrationId"])
    except Exception as err:  # a failed check, not a crash before the others are evaluated
        ui = {"error": f"{type(err).__name__}: {err}"}
    report["checks"] = check_all(members, mgmt, dyn, samplers, run, before, ui)
    save()
    failed = [name for name, c in report["checks"].items() if not c["ok"]]
    for name, c in report["checks"].items():
        log(f"check {name}: {'ok' if c['ok'] else 'FAILED'}")
    log(f"figures: {json.dumps(report['figures'])}")
    if failed:
        log(f"FAILED: {failed} (report: {args.json})")
        return 1
    return 0


if __name__ == "__main__":
    # os._exit: the Temporal client's runtime thread once aborted the interpreter's finalization
    # here ("PyGILState_Release: thread state ... must be current"), turning a verdict into 134.
    status_code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status_code)
