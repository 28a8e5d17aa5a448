"""The history scan: no credential may ever reach a Temporal history (issue 11, Security).

Shared by every integration test that runs a calibration on the real dev server: after the run,
every history on the server is read as ``temporal workflow show -o json`` prints it (payload data
decoded from base64) and searched for PEM blocks, kubeconfig credential fields and the actual
credential values in play.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence

import yaml
from kubernetes import client
from temporalio.client import Client

from orchestrator.localplane.plane import LocalPlane
from testkit.worker_rbac import WorkerIdentity

# What may never reach a Temporal history: PEM blocks and kubeconfig credential fields.
SECRET_MARKERS = (
    "-----BEGIN",
    "PRIVATE KEY",
    "client-key-data",
    "client-certificate-data",
    "certificate-authority-data",
)


def known_secrets(
    plane: LocalPlane, identity: WorkerIdentity, mgmt: client.ApiClient, namespaces: Sequence[str]
) -> list[str]:
    """The actual credential values in play: the worker's token, the admin credentials and every
    workload-cluster kubeconfig secret of ``namespaces`` (raw and base64)."""
    values = [identity.token]
    admin = yaml.safe_load(plane.kubeconfig.read_text())
    values += [v for u in admin["users"] for v in u["user"].values()]
    core = client.CoreV1Api(mgmt)
    for ns in namespaces:
        for secret in core.list_namespaced_secret(ns).items:
            for encoded in (secret.data or {}).values():
                values += [str(encoded), base64.b64decode(encoded).decode(errors="replace")]
    return [v for v in values if len(v) >= 16]


def _payload_texts(node: object) -> list[str]:
    """The decoded ``data`` of every Payload ({metadata, data}) inside a history's JSON."""
    if isinstance(node, dict):
        if "data" in node and "metadata" in node and isinstance(node["data"], str):
            return [base64.b64decode(node["data"]).decode(errors="replace")]
        return [t for v in node.values() for t in _payload_texts(v)]
    if isinstance(node, list):
        return [t for v in node for t in _payload_texts(v)]
    return []


async def scan_histories(temporal: Client, secrets: list[str]) -> tuple[int, list[str]]:
    """Every workflow history on the server, as `temporal workflow show -o json` prints it,
    searched for credentials. Returns (histories scanned, findings)."""
    findings: list[str] = []
    scanned = 0
    async for wf in temporal.list_workflows():
        history = await temporal.get_workflow_handle(wf.id, run_id=wf.run_id).fetch_history()
        text = history.to_json()
        text += "\n".join(_payload_texts(json.loads(text)))  # payload data is base64 there
        scanned += 1
        findings += [f"{wf.id}: {m}" for m in SECRET_MARKERS if m in text]
        findings += [f"{wf.id}: a credential value" for v in secrets if v in text]
    return scanned, findings
