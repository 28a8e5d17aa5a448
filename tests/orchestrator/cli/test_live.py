"""Live mode of the CLI without a server: which kubeconfig, context and namespace it uses, how it
fails, and how a live read's left-out and unreachable clusters reach the output.

The read itself (``orchestrator.kube.inventory.read_fleet``, our interface) is replaced where a
test is about the CLI around it; tests/integration/test_live_mode.py runs the real thing on the
local plane. Every test isolates $HOME, $KUBECONFIG and the local plane's state directory, so
what the developer's machine has never changes the outcome.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from orchestrator.cli import live
from orchestrator.cli.main import app
from orchestrator.domain.snapshot import WorkloadClusterStatus
from orchestrator.domain.snapshot_load import load_snapshot, snapshot_from_mapping
from orchestrator.kube import client as kube_client
from orchestrator.kube import inventory
from orchestrator.kube.backend.port import Inventory

runner = CliRunner()
FLEET: dict[str, Any] = {
    "availableVersions": ["v1.33.0", "v1.34.0"],
    "clusters": [
        {"name": "a", "controlPlane": {"version": "v1.33.0"}, "labels": {"env": "prod"}},
        {
            "name": "b",
            "controlPlane": {"version": "v1.34.0"},
            "workloadCluster": {
                "reachable": False,
                "reason": "no kubeconfig: Secret x/b not found",
            },
        },
    ],
    "workloads": [{"name": "w", "apis": ["apps/v1/Deployment"], "placement": {"clusters": ["a"]}}],
}


def kubeconfig(
    path: Path, server: str = "https://127.0.0.1:1", namespace: str | None = None
) -> Path:
    contexts = [
        {
            "name": "main",
            "context": {
                "cluster": "c",
                "user": "u",
                **({"namespace": namespace} if namespace else {}),
            },
        },
        {"name": "other", "context": {"cluster": "c", "user": "u", "namespace": "elsewhere"}},
    ]
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {"name": "c", "cluster": {"server": server, "insecure-skip-tls-verify": True}}
                ],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": contexts,
                "current-context": "main",
            }
        )
    )
    return path


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("CALIBRATOR_STATE_DIR", str(tmp_path / "no-plane"))
    return home


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[dict[str, Any]]]:
    """Replace the live read: record its arguments, return FLEET (and what was left out)."""
    calls: list[dict[str, Any]] = []

    def read_fleet(dyn: Any, namespace: str | None, **kw: Any) -> Inventory:
        calls.append({"namespace": namespace, "probe": kw.get("probe"), **kw})
        return Inventory(
            snapshot_from_mapping(FLEET),
            {"a": "x", "b": "x"},
            skipped={"broken": "the control plane declares no Kubernetes version"},
            pending={"new": "no controlPlaneRef yet"},
        )

    monkeypatch.setattr(inventory, "read_fleet", read_fleet)
    monkeypatch.setattr(kube_client, "dynamic", lambda api: object())
    yield calls


def test_nothing_to_read_names_every_way_to_give_a_fleet() -> None:
    result = runner.invoke(app, ["drift"])
    assert result.exit_code == 2
    assert result.stderr.startswith("error: no management cluster: give --kubeconfig")
    assert "calibrator env up" in result.stderr and "--snapshot" in result.stderr


@pytest.mark.parametrize(
    ("given", "env", "home", "expected"),
    [
        ("flag", "env", True, "flag"),
        (None, "env", True, "env"),
        (None, None, True, "home"),
    ],
)
def test_kubeconfig_precedence_is_kubectls(
    given: str | None,
    env: str | None,
    home: bool,
    expected: str,
    tmp_path: Path,
    isolated: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    files = {
        "flag": tmp_path / "flag",
        "env": tmp_path / "env",
        "home": isolated / ".kube" / "config",
    }
    files["home"].parent.mkdir()
    for path in files.values():
        kubeconfig(path)
    if not home:
        files["home"].unlink()
    if env:
        monkeypatch.setenv("KUBECONFIG", str(files["env"]))
    flag = files["flag"] if given else None
    assert live.kubeconfig_path(flag) == str(files[expected])


@pytest.mark.parametrize(
    ("args", "context_namespace", "namespace"),
    [
        ([], None, "default"),
        ([], "team-a", "team-a"),
        (["--context", "other"], "team-a", "elsewhere"),
        (["-n", "fleet"], "team-a", "fleet"),
        (["-A"], "team-a", None),
    ],
)
def test_namespace_follows_kubectl(
    args: list[str],
    context_namespace: str | None,
    namespace: str | None,
    tmp_path: Path,
    reads: list[dict[str, Any]],
) -> None:
    path = kubeconfig(tmp_path / "kc", namespace=context_namespace)
    result = runner.invoke(app, ["drift", "--kubeconfig", str(path), *args, "-o", "json"])
    assert result.exit_code == 1, result.stderr  # FLEET's read left clusters out
    assert [c["namespace"] for c in reads] == [namespace]


def test_an_unknown_context_is_bad_input(tmp_path: Path) -> None:
    path = kubeconfig(tmp_path / "kc")
    result = runner.invoke(app, ["drift", "--kubeconfig", str(path), "--context", "prod"])
    assert result.exit_code == 2
    assert "context 'prod' is not in the kubeconfig (contexts: main, other)" in result.stderr


def test_an_unreachable_management_cluster_exits_1_with_one_line(tmp_path: Path) -> None:
    with socket.socket() as sock:  # bound, never listening: connections are refused at once
        sock.bind(("127.0.0.1", 0))
        server = f"https://127.0.0.1:{sock.getsockname()[1]}"
        result = runner.invoke(
            app, ["plan", "-t", "v1.34.0", "--kubeconfig", str(kubeconfig(tmp_path / "kc", server))]
        )
    assert result.exit_code == 1
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: cannot read the fleet from {server}: ")
    assert result.stdout == ""


@pytest.mark.parametrize(
    ("args", "probe"), [([], True), (["--probe"], True), (["--no-probe"], False)]
)
def test_probing_is_the_default(
    args: list[str], probe: bool, tmp_path: Path, reads: list[dict[str, Any]]
) -> None:
    path = kubeconfig(tmp_path / "kc")
    runner.invoke(app, ["drift", "--kubeconfig", str(path), *args])
    assert (reads[0]["probe"] is not None) is probe
    assert reads[0]["require_workloads"] is False


@pytest.mark.parametrize(
    "argv",
    [
        ["drift"],
        ["plan", "-t", "v1.34.0"],
        ["check", "-t", "v1.34.0"],
        ["place"],
    ],
)
def test_live_output_names_unreachable_and_left_out_clusters(
    argv: list[str], tmp_path: Path, reads: list[dict[str, Any]]
) -> None:
    path = kubeconfig(tmp_path / "kc")
    as_json = runner.invoke(app, [*argv, "--kubeconfig", str(path), "-o", "json"])
    assert as_json.exit_code == 1, as_json.stderr  # left-out clusters make the answer partial
    doc = json.loads(as_json.stdout)
    assert doc["unreachable"] == [{"cluster": "b", "reason": "no kubeconfig: Secret x/b not found"}]
    assert as_json.stderr.splitlines() == [
        "warning: cluster broken left out (skipped: the control plane declares no Kubernetes "
        "version)",
        "warning: cluster new left out (being created: no controlPlaneRef yet)",
    ]
    table = runner.invoke(app, [*argv, "--kubeconfig", str(path)])
    assert "unreachable b: no kubeconfig: Secret x/b not found" in table.stdout


def test_drift_shows_each_clusters_workload_cluster_status(
    tmp_path: Path, reads: list[dict[str, Any]]
) -> None:
    path = kubeconfig(tmp_path / "kc")
    result = runner.invoke(app, ["drift", "--kubeconfig", str(path), "-o", "json"])
    rows = {c["name"]: c["workloadCluster"] for c in json.loads(result.stdout)["clusters"]}
    assert rows == {"a": None, "b": FLEET["clusters"][1]["workloadCluster"]}
    wide = runner.invoke(app, ["drift", "--kubeconfig", str(path), "-o", "wide"])
    assert "unreachable: no kubeconfig" in wide.stdout


def test_drift_selector_narrows_the_rows(tmp_path: Path, reads: list[dict[str, Any]]) -> None:
    path = kubeconfig(tmp_path / "kc")
    result = runner.invoke(
        app, ["drift", "--kubeconfig", str(path), "-l", "env=prod", "-o", "json"]
    )
    assert [c["name"] for c in json.loads(result.stdout)["clusters"]] == ["a"]
    none = runner.invoke(app, ["drift", "--kubeconfig", str(path), "-l", "env=qa"])
    assert none.exit_code == 2 and "selector env=qa matches no cluster" in none.stderr


@pytest.mark.parametrize("fmt", ["yaml", "json"])
def test_snapshot_writes_a_strict_fleet_snapshot(
    fmt: str, tmp_path: Path, reads: list[dict[str, Any]]
) -> None:
    path = kubeconfig(tmp_path / "kc")
    result = runner.invoke(app, ["snapshot", "--kubeconfig", str(path), "-o", fmt])
    assert result.exit_code == 1  # two clusters were left out, named on stderr
    assert "warning: cluster new left out" in result.stderr
    assert load_snapshot(result.stdout) == snapshot_from_mapping(FLEET)


def test_snapshot_default_output_is_yaml(tmp_path: Path, reads: list[dict[str, Any]]) -> None:
    path = kubeconfig(tmp_path / "kc")
    result = runner.invoke(app, ["snapshot", "--kubeconfig", str(path)])
    doc = yaml.safe_load(result.stdout)
    assert doc["kind"] == "FleetSnapshot"
    status = load_snapshot(result.stdout).cluster("b").workload_cluster
    assert status == WorkloadClusterStatus(False, "no kubeconfig: Secret x/b not found")


@pytest.mark.parametrize(
    ("argv", "flags"),
    [
        (["drift", "--context", "x"], "--context is"),
        (["plan", "-t", "v1.34.0", "-n", "x"], "--namespace is"),
        (["check", "-t", "v1.34.0", "--no-probe"], "--no-probe is"),
        (["place", "--probe", "-A"], "--all-namespaces, --probe are"),
    ],
)
def test_a_file_and_live_flags_do_not_mix(argv: list[str], flags: str, tmp_path: Path) -> None:
    snap = tmp_path / "fleet.yaml"
    snap.write_text(yaml.safe_dump(FLEET))
    result = runner.invoke(app, [*argv, "-s", str(snap)])
    assert result.exit_code == 2
    assert result.stderr.startswith("error: --snapshot reads a file; ")
    assert flags in result.stderr and result.stdout == ""
