"""A calibration whose worker reaches kube-apiserver only through a fault-injecting proxy.

Usage: ``python -m benchmarks.bench_faults --clusters 6 --rate 0.2``. Starts its own local plane
(CAPD's fixed port means no other plane may run), provisions two identical fleets (CAPD
in-memory; managed-topology and KCP+MachineDeployment clusters alternate, one and two minors
behind alternate), and calibrates the first through the proxy with no faults (the clean run) and
the second at ``--rate`` faults, so the wall-time ratio compares like with like. The same code
runs the CI test (tests/integration/test_api_faults.py: 3 clusters, 15 % faults, no clean run).

The proxy (testkit/faultproxy.py) re-terminates TLS, forwards the worker's bearer token
and injects 409 on writes, 429 with Retry-After, 500, 503, connection resets and answers held
past the client's timeout. Checked while it runs (AssertionError otherwise):
- no cluster is ever observed mid-upgrade and untainted (bench_calibration.Sampler: four LISTs
  about once a second, as the admin, not through the proxy);
- at the end every cluster is at the target, rolled out, untainted and schedulable;
- exactly one effective version write per step, counted at the proxy (a PATCH carrying the step
  annotation that kube-apiserver answered 2xx), and one per step as the backend recorded it.

Measured: requests and faults injected by kind, retries inside the calls by cause (the
hardened client's hook), activity retries (Temporal attempts beyond the first, from every
history), version writes sent and effective, wall time.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import subprocess
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from benchmarks.bench_calibration import STUCK, Sampler
from orchestrator.domain.taints import SCHEDULABLE_LABEL
from orchestrator.kube import capi
from orchestrator.kube.backend.access import PatchRecord
from orchestrator.kube.backend.fleet import KubeFleetBackend
from orchestrator.kube.client import RequestPolicy, api_client, dynamic
from orchestrator.localplane.plane import LocalPlane
from testkit.capd_fleet import (
    CREATE_TIMEOUT,
    TARGET,
    observe,
    provision,
    wait_available,
)
from testkit.workflow_harness import start_dev_server
from workflows.client import start_calibration, status
from workflows.model import CalibrationInput, CalibrationOptions, Phase, Timeouts
from workflows.worker import build_worker

# The worker's client under faults: 4 s per attempt, so an answer held 6 s is a timeout.
REQUESTS = RequestPolicy(timeout=4.0, attempts=4, backoff=0.5, max_backoff=2.0, retry_after_cap=2.0)
HELD_SECONDS = 6.0
RETRY_AFTER = 1
# The first version writes meet these faults whatever the draw: a 409 (re-read, written again),
# an answer held past the timeout (written, answer lost: the retry's 409 finds it done) and a
# reset before the write reached kube-apiserver.
SCRIPTED = ("conflict", "delay", "reset")
OPTIONS = CalibrationOptions(
    worker_concurrency=4,
    timeouts=Timeouts(
        activity_seconds=60, rollout_seconds=900, heartbeat_seconds=30, poll_seconds=2
    ),
)


def layout_of(clusters: int) -> dict[str, tuple[str, bool, str]]:
    """name -> (start version, managed topology?, group): topology/KCP and one/two minors behind
    alternate (the two-minor topology cluster takes the webhook-bypass path under faults)."""
    starts = ("v1.33.0", "v1.33.0", "v1.32.0", "v1.32.0")
    return {f"f{i:02d}": (starts[i % 4], i % 2 == 0, "g0") for i in range(clusters)}


def one_stage(concurrency: int) -> dict[str, Any]:
    """Every cluster in one stage, ``concurrency`` at a time."""
    return {
        "apiVersion": "calibrator.dev/v1alpha1",
        "kind": "CalibrationStrategy",
        "stages": [
            {
                "name": "all",
                "selector": {"matchLabels": {"env": "scale"}},
                "maxConcurrency": concurrency,
            }
        ],
    }


class CountingBackend(KubeFleetBackend):
    """The real backend, counting retries inside calls and version writes (per step)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.retries: Counter[str] = Counter()
        self.writes: Counter[str] = Counter()
        super().__init__(*args, **kwargs)

    def retried(self, method: str, url: str, why: str, delay: float) -> None:
        self.retries[why] += 1

    def wrote_version(self, record: PatchRecord) -> None:
        self.writes[f"{record.cluster}/{record.step_id}"] += 1


@dataclass
class FaultReport:
    """One run's figures (``markdown`` for the docs)."""

    label: str
    clusters: int
    rate: float
    wall: float
    converged: int
    steps: int
    proxy: dict[str, Any]
    client_retries: dict[str, int]
    activity_retries: int
    duplicate_writes: int
    violations: list[str] = field(default_factory=list)
    samples: int = 0

    def row(self) -> str:
        faults = ", ".join(f"{k} {v}" for k, v in self.proxy["faults"].items()) or "none"
        retries = sum(self.client_retries.values())
        return (
            f"| {self.label} | {self.clusters} | {self.rate:.0%} | {self.proxy['requests']} | "
            f"{self.proxy['faults_total']} ({faults}) | {retries} | {self.activity_retries} | "
            f"{self.converged}/{self.clusters} | {self.steps} | "
            f"{self.proxy['version_writes']} / {self.proxy['effective_version_writes']} | "
            f"{self.duplicate_writes} | {len(self.violations)} ({self.samples} samples) | "
            f"{self.wall:.0f} |"
        )

    @staticmethod
    def header() -> str:
        return (
            "| run | clusters | fault rate | requests | faults injected (by kind) | "
            "retries in calls | activity retries | converged | steps | "
            "version writes sent / effective | duplicate writes | ungated mid-rollout "
            "observations | wall s |\n"
            "|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"
        )


def upstream_ca(kubeconfig: Path, path: Path) -> Path:
    """The CA of a kubeconfig's first cluster, as a PEM file (the proxy verifies the plane)."""
    config = yaml.safe_load(kubeconfig.read_text())
    path.write_bytes(
        base64.b64decode(config["clusters"][0]["cluster"]["certificate-authority-data"])
    )
    return path


async def _activity_retries(temporal: Client, workflow_id: str, children: list[str]) -> int:
    """Attempts beyond the first of every activity, from the parent's and children's histories."""
    retries = 0
    for wid in [workflow_id, *(f"{workflow_id}/{c}" for c in children)]:
        async for wf in temporal.list_workflows(f'WorkflowId = "{wid}"'):
            history = await temporal.get_workflow_handle(wf.id, run_id=wf.run_id).fetch_history()
            retries += sum(
                e.activity_task_started_event_attributes.attempt - 1
                for e in history.events
                if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
            )
    return retries


async def calibrate_through_proxy(
    *,
    plane_kubeconfig: Path,
    token: str,
    namespace: str,
    layout: dict[str, tuple[str, bool, str]],
    rate: float,
    seed: int,
    workdir: Path,
    timeout: float,
    label: str = "faults",
) -> FaultReport:
    """Calibrate the provisioned fleet of ``namespace`` to TARGET through the fault proxy."""
    from testkit.faultproxy import FaultProxy, upstream_of  # noqa: PLC0415

    mgmt = api_client(plane_kubeconfig)
    dyn = dynamic(mgmt)
    workdir.mkdir(parents=True, exist_ok=True)
    proxy = FaultProxy(
        upstream_of(plane_kubeconfig),
        upstream_ca(plane_kubeconfig, workdir / "upstream-ca.crt"),
        workdir / "proxy",
        rate=rate,
        seed=seed,
        delay=HELD_SECONDS,
        retry_after=RETRY_AFTER,
        version_write_faults=SCRIPTED if rate else (),
    ).start()
    env = await start_dev_server()
    try:
        worker_api = api_client(proxy.kubeconfig(workdir / "worker-kubeconfig", token))
        backend = CountingBackend(worker_api, namespace, requests=REQUESTS)
        task_queue = f"faults-{uuid.uuid4().hex[:8]}"
        sampler = Sampler(dyn, namespace, layout)
        async with build_worker(env.client, backend, task_queue=task_queue):
            with sampler.running():
                began = time.monotonic()
                handle = await start_calibration(
                    env.client,
                    CalibrationInput(
                        target=TARGET, strategy=one_stage(len(layout)), options=OPTIONS
                    ),
                    task_queue=task_queue,
                )
                result_task = asyncio.ensure_future(handle.result())
                while not result_task.done():
                    await asyncio.wait({result_task}, timeout=5)
                    if result_task.done():
                        break
                    progress = await status(env.client, handle.id)
                    if progress.phase in STUCK:
                        raise AssertionError(
                            f"calibration stuck in {progress.phase}: {progress.message}; "
                            + "; ".join(
                                f"{c.name}: {c.state} {c.message}" for c in progress.clusters
                            )
                        )
                    if time.monotonic() - began > timeout:
                        raise AssertionError(f"calibration not finished after {timeout:.0f}s")
                result = result_task.result()
                wall = time.monotonic() - began
        assert result.phase == Phase.COMPLETED, (result.phase, result.message)
        proxy.set_rate(0.0)
        names = [c.name for c in result.clusters]
        activity_retries = await _activity_retries(env.client, handle.id, names)
    finally:
        await env.shutdown()
        proxy.stop()

    # The end state, read as the admin: at the target, rolled out, untainted, schedulable.
    final = observe(dyn, namespace)
    clusters = dyn.resources.get(api_version=capi.CLUSTER[0], kind=capi.CLUSTER[1])
    converged = 0
    for name in layout:
        view = final[name]
        labels = clusters.get(name=name, namespace=namespace).to_dict()["metadata"]["labels"]
        assert view.versions == {TARGET} and view.rolled_out, (name, view)
        assert not view.tainted and labels.get(SCHEDULABLE_LABEL) == "true", (name, labels)
        converged += 1
    steps = sum(len(c.steps) for c in result.clusters)

    # Exactly one effective version write per step, at the proxy and as the backend recorded.
    effective = proxy.stats.effective_writes()
    duplicates = sum(n - 1 for n in effective.values() if n > 1)
    assert duplicates == 0, {k: n for k, n in effective.items() if n > 1}
    assert len(effective) == steps, (len(effective), steps, sorted(effective))
    # The backend records a write it saw succeed; one whose answer was lost it finds done.
    assert set(backend.writes.values()) <= {1}, backend.writes
    if rate:
        met = {w.fault for w in proxy.stats.writes}
        assert met >= set(SCRIPTED), proxy.stats.writes
    assert not sampler.violations, sampler.violations[:10]
    assert sampler.samples > 0
    return FaultReport(
        label=label,
        clusters=len(layout),
        rate=rate,
        wall=wall,
        converged=converged,
        steps=steps,
        proxy=proxy.stats.snapshot(),
        client_retries=dict(sorted(backend.retries.items())),
        activity_retries=activity_retries,
        duplicate_writes=duplicates,
        violations=list(sampler.violations),
        samples=sampler.samples,
    )


def worker_token(kubeconfig: Path, mgmt: client.ApiClient, namespaces: list[str]) -> str:
    """deploy/rbac applied, its bindings in ``namespaces``, a TokenRequest token for the worker."""
    from testkit.worker_rbac import (  # noqa: PLC0415
        REPO,
        WORKER_SA,
        grant_kubeconfig_reader,
        grant_plan_store,
    )

    subprocess.run(
        ["kubectl", "--kubeconfig", str(kubeconfig), "apply", "--server-side",
         "--field-manager=calibrator-bench", "-k", str(REPO / "deploy" / "rbac")],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    for ns in namespaces:
        grant_kubeconfig_reader(mgmt, ns)
        grant_plan_store(mgmt, ns)
    request = client.AuthenticationV1TokenRequest(
        spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=3 * 3600)
    )
    issued = client.CoreV1Api(mgmt).create_namespaced_service_account_token(
        WORKER_SA[1], WORKER_SA[0], request
    )
    assert issued.status is not None and issued.status.token, "TokenRequest returned no token"
    return str(issued.status.token)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--clusters", type=int, default=6)
    parser.add_argument("--rate", type=float, default=0.2, help="share of faulty requests")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--timeout", type=float, default=1800.0, help="bound per run (s)")
    args = parser.parse_args(argv)
    if not 1 <= args.clusters <= 50 or not 0 < args.rate < 1:
        parser.error("--clusters must be 1..50 and --rate in (0, 1)")
    layout = layout_of(args.clusters)
    with tempfile.TemporaryDirectory() as tmp:
        plane = LocalPlane(Path(tmp) / "plane")
        plane.up(timeout=300, ttl_seconds=int(args.timeout) * 2 + 900)
        try:
            mgmt = api_client(plane.kubeconfig)
            dyn = dynamic(mgmt)
            runs = [("clean", "faults-clean", 0.0), ("faults", "faults-injected", args.rate)]
            for _, namespace, _ in runs:
                provision(dyn, namespace, layout)
            token = worker_token(plane.kubeconfig, mgmt, [ns for _, ns, _ in runs])
            for _, namespace, _ in runs:
                created = wait_available(dyn, namespace, layout, CREATE_TIMEOUT)
                print(f"{namespace}: {len(layout)} clusters Available after {created:.0f}s")
            reports = []
            for label, namespace, rate in runs:
                run = calibrate_through_proxy(
                    plane_kubeconfig=plane.kubeconfig, token=token, namespace=namespace,
                    layout=layout, rate=rate, seed=args.seed, workdir=Path(tmp) / label,
                    timeout=args.timeout, label=label,
                )  # fmt: skip
                reports.append(asyncio.run(run))
        finally:
            plane.down(purge=True)
    print(FaultReport.header())
    for report in reports:
        print(report.row())
    clean, faulty = reports
    print(f"\nwall-time ratio faults/clean: {faulty.wall / clean.wall:.2f}")
    print(f"retries in calls by cause: {faulty.client_retries}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
