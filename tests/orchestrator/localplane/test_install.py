"""The CAPI CRDs and webhook configurations as the plane installs them, from a built manifest."""

from pathlib import Path
from typing import Any

import yaml

from orchestrator.localplane.components import MANAGERS, assign_ports
from orchestrator.localplane.install import capi_crds, webhook_configs


def _manifest(tmp_path: Path) -> dict[str, Any]:
    crd_dirs: dict[str, str] = {}
    webhooks: dict[str, str] = {}
    for m in MANAGERS:
        directory = tmp_path / m.component
        directory.mkdir()
        versions = [{"name": "v1beta2"}] + ([{"name": "v1beta1"}] if m.name == "capi" else [])
        crd = {"metadata": {"name": f"things.{m.name}"}, "spec": {"versions": versions}}
        (directory / "crd.yaml").write_text(yaml.safe_dump(crd) + "---\n")
        crd_dirs[m.component] = str(directory)
        hook = {
            "metadata": {"name": "validating"},
            "webhooks": [{"clientConfig": {"service": {"path": "/validate-x"}}}],
        }
        webhook_file = tmp_path / f"{m.component}-webhooks.yaml"
        webhook_file.write_text(yaml.safe_dump(hook))
        webhooks[m.component] = str(webhook_file)
    return {"crdDirsByComponent": crd_dirs, "webhookManifests": webhooks}


def test_crds_carry_provider_and_contract_labels_and_convert_at_their_manager(
    tmp_path: Path,
) -> None:
    ports = assign_ports({})
    crds = {c["metadata"]["name"]: c for c in capi_crds(_manifest(tmp_path), ports, "CA")}
    core, kcp = crds["things.capi"], crds["things.kubeadm-control-plane"]
    assert core["metadata"]["labels"] == {"cluster.x-k8s.io/provider": "cluster-api"}
    assert kcp["metadata"]["labels"]["cluster.x-k8s.io/v1beta2"] == "v1beta2"
    client = core["spec"]["conversion"]["webhook"]["clientConfig"]
    assert client == {"url": f"https://127.0.0.1:{ports['capi-webhook']}/convert", "caBundle": "CA"}
    assert "conversion" not in kcp["spec"]  # one version: nothing to convert


def test_webhook_configurations_are_renamed_apart_and_point_at_127_0_0_1(tmp_path: Path) -> None:
    ports = assign_ports({})
    docs = list(webhook_configs(_manifest(tmp_path), ports, "CA"))
    assert [d["metadata"]["name"] for d in docs] == [
        f"calibrator-{m.name}-validating" for m in MANAGERS
    ]
    assert docs[-1]["webhooks"][0]["clientConfig"] == {
        "url": f"https://127.0.0.1:{ports['capd-webhook']}/validate-x",
        "caBundle": "CA",
    }
