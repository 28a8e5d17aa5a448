"""What the plane installs into its API server, and the waits that say it took.

The CAPI CRDs with the labels kustomize would add and conversion pointed at the owning manager,
our own calibrator.dev CRDs, and each manager's webhook configurations pointed at 127.0.0.1 with
our CA (the envtest approach: no Services, no cert-manager). Each install waits until the API
server uses it: CRDs Established, a dry-run Cluster answered by the core webhook, and the OpenAPI
document built in both formats clients ask for.

The Kubernetes client is imported inside the functions that need it, so that ``calibrator env
status`` and ``down`` never load it.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from orchestrator.localplane.components import MANAGERS
from orchestrator.localplane.processes import (
    PlaneError,
    ProcessRecord,
    TLSClient,
    healthy,
    wait_until,
)

OPENAPI_V2_PROTOBUF = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
OPENAPI_WAIT_SECONDS = 120.0  # one request's limit while the document is built


def capi_crds(
    manifest: dict[str, Any], ports: dict[str, int], ca_b64: str
) -> Iterator[dict[str, Any]]:
    """CRDs with the labels kustomize would add and conversion pointed at the owning manager."""
    for m in MANAGERS:
        directory = Path(manifest["crdDirsByComponent"][m.component])
        for path in sorted(directory.glob("*.yaml")):
            for doc in yaml.safe_load_all(path.read_text()):
                if not doc:
                    continue
                labels = doc["metadata"].setdefault("labels", {}) or {}
                doc["metadata"]["labels"] = labels
                labels["cluster.x-k8s.io/provider"] = m.provider_label
                if m.contract_labels:
                    # CAPI core resolves the API version of every bootstrap / control-plane /
                    # infrastructure reference from these contract labels.
                    labels["cluster.x-k8s.io/v1beta1"] = "v1beta1"
                    labels["cluster.x-k8s.io/v1beta2"] = "v1beta2"
                if len(doc["spec"]["versions"]) > 1:
                    doc["spec"]["conversion"] = {
                        "strategy": "Webhook",
                        "webhook": {
                            "conversionReviewVersions": ["v1"],
                            "clientConfig": {
                                "url": f"https://127.0.0.1:{m.webhook_port(ports)}/convert",
                                "caBundle": ca_b64,
                            },
                        },
                    }
                yield doc


def webhook_configs(
    manifest: dict[str, Any], ports: dict[str, int], ca_b64: str
) -> Iterator[dict[str, Any]]:
    """Each manager's webhook configurations, renamed apart and pointed at 127.0.0.1."""
    for m in MANAGERS:
        text = Path(manifest["webhookManifests"][m.component]).read_text()
        for doc in yaml.safe_load_all(text):
            if not doc:
                continue
            doc["metadata"]["name"] = f"calibrator-{m.name}-{doc['metadata']['name']}"
            for hook in doc.get("webhooks", []):
                path = hook["clientConfig"]["service"]["path"]
                hook["clientConfig"] = {
                    "url": f"https://127.0.0.1:{m.webhook_port(ports)}{path}",
                    "caBundle": ca_b64,
                }
            yield doc


def connect(kubeconfig: Path) -> Any:
    """A dynamic client of the plane's API server, for the installs below.

    One client serves them all: its discovery is cached, and refreshed when a kind that was
    just installed is asked for.
    """
    from orchestrator.kube.client import api_client, dynamic  # noqa: PLC0415

    return dynamic(api_client(kubeconfig))


def install_capi_crds(
    dyn: Any, manifest: dict[str, Any], ports: dict[str, int], ca_b64: str, timeout: float
) -> None:
    """Server-side apply the CAPI CRDs and wait until every one is Established."""
    from orchestrator.kube.client import apply_all  # noqa: PLC0415

    crds = list(capi_crds(manifest, ports, ca_b64))
    apply_all(dyn, crds)
    _wait_crds_established(dyn, [c["metadata"]["name"] for c in crds], timeout)


def install_calibrator_crds(dyn: Any, timeout: float = 60.0) -> None:
    """Server-side apply our calibrator.dev CRDs (idempotent) and wait until Established."""
    from orchestrator.kube.fleetapi import install_crds  # noqa: PLC0415

    install_crds(dyn, timeout)


def install_webhooks(
    dyn: Any, manifest: dict[str, Any], ports: dict[str, int], ca_b64: str, timeout: float
) -> None:
    """Apply the managers' webhook configurations and wait until the core webhook answers."""
    from orchestrator.kube.client import apply_all  # noqa: PLC0415

    apply_all(dyn, webhook_configs(manifest, ports, ca_b64))
    _wait_webhooks(dyn, timeout)


def _wait_crds_established(dyn: Any, names: list[str], timeout: float) -> None:
    from orchestrator.kube.client import read_json  # noqa: PLC0415

    crd_api = dyn.resources.get(
        api_version="apiextensions.k8s.io/v1", kind="CustomResourceDefinition"
    )

    def established() -> bool:
        items = read_json(crd_api.get).get("items", [])
        ready = {
            i["metadata"]["name"]
            for i in items
            if any(
                c["type"] == "Established" and c["status"] == "True"
                for c in ((i.get("status") or {}).get("conditions") or [])
            )
        }
        return set(names) <= ready

    wait_until("CRDs established", established, timeout)


def _wait_webhooks(dyn: Any, timeout: float) -> None:
    """Dry-run create a Cluster until the core validating webhook answers.

    The probe is deliberately incomplete: a denial *from the webhook* proves the API server can
    reach the manager over TLS with our CA, which is all this wait is about.
    """
    clusters = dyn.resources.get(api_version="cluster.x-k8s.io/v1beta2", kind="Cluster")
    probe = {
        "apiVersion": "cluster.x-k8s.io/v1beta2",
        "kind": "Cluster",
        "metadata": {"name": "webhook-probe", "namespace": "default"},
        "spec": {"paused": True},
    }
    errors: list[str] = []

    def answered() -> bool:
        try:
            clusters.create(body=probe, namespace="default", query_params=[("dryRun", "All")])
            return True
        except Exception as err:
            text = str(getattr(err, "body", None) or err)
            if "validation.cluster.cluster.x-k8s.io" in text and "denied the request" in text:
                return True
            errors[:] = [text[:400]]
            return False

    try:
        wait_until("webhooks", answered, timeout)
    except PlaneError as err:
        raise PlaneError(f"{err}; last error: {errors[-1] if errors else '-'}") from None


def wait_openapi(api_url: str, tls: TLSClient, timeout: float, apiserver: ProcessRecord) -> None:
    """Until kube-apiserver has built its OpenAPI v2 document in both formats clients ask for.

    It builds them lazily, once per format, on the first request after a start or a CRD change;
    with every CAPI CRD installed that takes tens of seconds on a busy machine, longer than some
    clients wait (Pulumi's Kubernetes provider gives up after 32 s), so the plane is ready only
    once both are built.
    """
    deadline = time.monotonic() + timeout
    for accept in ("application/json", OPENAPI_V2_PROTOBUF):
        wait_until(
            f"kube-apiserver OpenAPI ({accept})",
            functools.partial(healthy, f"{api_url}/openapi/v2", tls, OPENAPI_WAIT_SECONDS, accept),
            max(5.0, deadline - time.monotonic()),
            apiserver,
        )
