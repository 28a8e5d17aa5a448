"""deploy/ rendered by the real kustomize (``kubectl kustomize``): the example overlay is all a
deployment needs, and each fleet namespace it lists gets the kubeconfig reader and nothing more.

The render is what ``kubectl apply -k`` sends; tests/integration/test_deploy_overlay.py applies it
to a real API server and calibrates through it.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import yaml

from orchestrator.kube import fleetapi
from workflows import health

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
EXAMPLE = DEPLOY / "overlays" / "example"
EXAMPLE_FLEET = ("fleet-eu", "fleet-us", "fleet-lab")
WORKER_SA = {"kind": "ServiceAccount", "name": "fleet-calibrator", "namespace": "calibrator-system"}


def render(root: Path) -> list[dict[str, Any]]:
    """The objects ``kubectl apply -k root`` would send."""
    proc = subprocess.run(
        ["kubectl", "kustomize", str(root)], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr
    return [d for d in yaml.safe_load_all(proc.stdout) if d]


def _by_kind(objects: list[dict[str, Any]], kind: str) -> dict[tuple[str, str], dict[str, Any]]:
    return {
        (o["metadata"].get("namespace", ""), o["metadata"]["name"]): o
        for o in objects
        if o["kind"] == kind
    }


def test_the_example_overlay_holds_the_crds_the_identity_and_the_worker() -> None:
    objects = render(EXAMPLE)
    crds = _by_kind(objects, "CustomResourceDefinition")
    assert sorted(name for _, name in crds) == sorted(fleetapi.CRD_NAMES)
    assert [c for c in objects if c["kind"] == "CustomResourceDefinition"] == [
        c for c in fleetapi.crd_manifests()
    ]  # the package's copy, the only one
    assert set(_by_kind(objects, "ClusterRole")) == {
        ("", "fleet-calibrator"),
        ("", "fleet-calibrator-kubeconfig-reader"),
        ("", "fleet-calibrator-plan-store"),
    }
    bindings = _by_kind(objects, "RoleBinding")
    # The plan store where the worker keeps its plans (its own namespace), the kubeconfig reader
    # in each listed fleet namespace, and nothing else: no Secret access anywhere else.
    assert set(bindings) == {("calibrator-system", "fleet-calibrator-plans")} | {
        (ns, "fleet-calibrator-kubeconfigs") for ns in EXAMPLE_FLEET
    }
    for (ns, _), binding in bindings.items():
        assert binding["subjects"] == [WORKER_SA], binding
        role = binding["roleRef"]["name"]
        assert role == (
            "fleet-calibrator-plan-store"
            if ns == "calibrator-system"
            else "fleet-calibrator-kubeconfig-reader"
        )
    (namespace,) = _by_kind(objects, "Namespace")
    assert namespace == ("", "calibrator-system")  # the fleet's namespaces are not ours to own


def test_the_example_overlay_sets_only_the_image_and_the_temporal_address() -> None:
    (deployment,) = _by_kind(render(EXAMPLE), "Deployment").values()
    (base,) = _by_kind(render(DEPLOY / "base"), "Deployment").values()
    assert deployment["spec"]["replicas"] == 2
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    (original,) = base["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "registry.example.com/fleet-calibrator:0.1.0"
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["TEMPORAL_ADDRESS"] == "temporal.example.internal:7233"
    # The all-namespaces worker: no --namespace (plans in the pod's own namespace).
    assert "--namespace" not in container["args"]
    container.pop("image"), original.pop("image")
    container["env"] = [e for e in container["env"] if e["name"] != "TEMPORAL_ADDRESS"]
    original["env"] = [e for e in original["env"] if e["name"] != "TEMPORAL_ADDRESS"]
    assert deployment == base


def test_the_fleet_namespace_unit_alone_binds_nowhere_it_was_not_told(tmp_path: Path) -> None:
    """Included without a namespace, the RoleBinding names a namespace that does not exist, so
    the apply fails instead of binding the Secret reader in the kubectl context's namespace."""
    (binding,) = render(DEPLOY / "fleet-namespace")
    assert binding["metadata"]["namespace"] == "fleet-namespace-not-set"
    overlay = tmp_path / "fleet-x"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "namespace": "fleet-x",
                "resources": [os.path.relpath(DEPLOY / "fleet-namespace", overlay)],
            }
        )
    )
    (moved,) = render(overlay)
    assert moved["metadata"]["namespace"] == "fleet-x"
    assert moved["subjects"] == [WORKER_SA]  # the subject stays the worker's ServiceAccount


def test_the_probes_ask_the_health_endpoint_not_the_metrics_page() -> None:
    """/metrics grows past what a probe reads (the SDK then logs a reset connection at every
    probe) and says nothing of polling: the probes ask the worker's /livez and /readyz."""
    (deployment,) = _by_kind(render(EXAMPLE), "Deployment").values()
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    args = container["args"]
    assert args[args.index("--health-address") + 1] == f"0.0.0.0:{ports['health']}"
    assert args[args.index("--metrics-address") + 1] == f"0.0.0.0:{ports['metrics']}"
    assert container["livenessProbe"]["httpGet"] == {"path": "/livez", "port": "health"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
    # Each answer of the server's poll check fits in the probe's timeout.
    for probe in (container["livenessProbe"], container["readinessProbe"]):
        assert probe["timeoutSeconds"] > health.CHECK_TIMEOUT


def test_the_kind_overlay_sets_only_the_image_the_temporal_address_and_its_fleet() -> None:
    """deploy/overlays/kind, what tools/e2e-kind.sh applies: the example's shape for its stack."""
    objects = render(DEPLOY / "overlays" / "kind")
    (deployment,) = _by_kind(objects, "Deployment").values()
    (base,) = _by_kind(render(DEPLOY / "base"), "Deployment").values()
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    (original,) = base["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "fleet-calibrator:dev"  # loaded with kind load, not pulled
    assert container["imagePullPolicy"] == "IfNotPresent"
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["TEMPORAL_ADDRESS"] == "172.30.0.1:7233"  # the kind network's gateway
    container["env"] = [e for e in container["env"] if e["name"] != "TEMPORAL_ADDRESS"]
    original["env"] = [e for e in original["env"] if e["name"] != "TEMPORAL_ADDRESS"]
    assert deployment == base
    assert set(_by_kind(objects, "RoleBinding")) == {
        ("calibrator-system", "fleet-calibrator-plans"),
        ("capd-docker", "fleet-calibrator-kubeconfigs"),
    }
