"""``check`` and ``plan`` on a snapshot that carries observed usage (issue 27).

The live inventory fills the same ``WorkloadClusterStatus`` that a snapshot file does, so these
offline runs are the findings a live ``check`` gives: the file is the parity test.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from orchestrator.cli.main import app
from orchestrator.cli.output import EXIT_FOUND, EXIT_OK, EXIT_PARTIAL
from orchestrator.domain.snapshot_dump import dump_snapshot
from orchestrator.domain.snapshot_load import load_snapshot

runner = CliRunner()
VAC_ALPHA = "storage.k8s.io/v1alpha1/VolumeAttributesClass"  # removed in 1.35
VAC_BETA = "storage.k8s.io/v1beta1/VolumeAttributesClass"  # removed in 1.37


def usage(api: str, release: str, *, quiet: bool = False) -> dict[str, Any]:
    return {
        "api": api,
        "resource": "volumeattributesclasses",
        "source": "metric",
        "removedRelease": release,
        "requests": 1204,
        "firstSeen": "2026-12-05T10:02:00Z",
        "lastSeen": "2026-12-05T10:30:00Z" if quiet else "2026-12-05T11:00:00Z",
        "observedAt": "2026-12-05T11:00:00Z",
        "example": "10.0.0.5:6443",
    }


def write_fleet(tmp_path: Path, **observed: dict[str, Any]) -> str:
    """Clusters named after ``observed``'s keys (each with what it was seen doing), plus `clean`."""
    clusters = [
        {
            "name": name,
            "controlPlane": {"version": "v1.34.0"},
            "machineDeployments": [{"name": "md-0", "version": "v1.34.0"}],
            "workloadCluster": {"reachable": True} | seen,
        }
        for name, seen in {**observed, "clean": {}}.items()
    ]
    path = tmp_path / "fleet.yaml"
    path.write_text(
        yaml.safe_dump({"availableVersions": ["v1.34.0", "v1.35.0"], "clusters": clusters})
    )
    return str(path)


def check(fleet: str, *args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, ["check", "--snapshot", fleet, "-t", "v1.35.0", *args])
    return result.exit_code, result.stdout, result.stderr


def test_an_active_observed_usage_blocks_and_fails_the_block_gate(tmp_path: Path) -> None:
    fleet = write_fleet(tmp_path, busy={"apiUsage": [usage(VAC_ALPHA, "1.35")]})
    code, out, err = check(fleet, "-o", "json")
    assert (code, err) == (EXIT_OK, "")
    doc = json.loads(out)
    (finding,) = doc["findings"]
    assert {k: finding[k] for k in ("cluster", "workload", "source", "action", "active")} == {
        "cluster": "busy",
        "workload": "",
        "source": "metric",
        "action": "block",
        "active": True,
    }
    assert finding["detail"].startswith(
        "observed: 1,204 requests to storage.k8s.io/v1alpha1 volumeattributesclasses since "
        "2026-12-05 10:02 UTC (apiserver metrics)"
    )
    assert finding["subject"] == "10.0.0.5:6443"
    assert doc["complete"] is True and doc["partiallyObserved"] == []
    code, _, err = check(fleet, "--fail-on", "block", "-o", "json")
    assert code == EXIT_FOUND
    assert err == (
        f"--fail-on block: 1 finding found: busy: {VAC_ALPHA} (apiserver metrics) (block)\n"
    )


@pytest.mark.parametrize(
    "seen",
    [
        {"apiUsage": [usage(VAC_ALPHA, "1.35", quiet=True)]},
        {"apiUsage": [usage(VAC_BETA, "1.37")]},
    ],
    ids=["quiet usage", "removal after the target"],
)
def test_a_warning_passes_the_block_gate_and_fails_the_warn_gate(
    tmp_path: Path, seen: dict[str, Any]
) -> None:
    fleet = write_fleet(tmp_path, a=seen)
    code, out, err = check(fleet, "--fail-on", "block", "-o", "json")
    assert (code, err) == (EXIT_OK, "")
    assert [f["action"] for f in json.loads(out)["findings"]] == ["warn"]
    code, _, err = check(fleet, "--fail-on", "warn")
    assert code == EXIT_FOUND and err.endswith("(warn)\n")


def test_the_strategy_turns_observed_blocks_into_warnings(tmp_path: Path) -> None:
    fleet = write_fleet(
        tmp_path,
        busy={"apiUsage": [usage(VAC_ALPHA, "1.35")]},
        held={
            "disruptionBlockers": [
                {"namespace": "shop", "name": "web", "reason": "maxUnavailable is 0"}
            ]
        },
    )
    strategy = tmp_path / "strategy.yaml"
    strategy.write_text(
        yaml.safe_dump(
            {
                "stages": [{"name": "all"}],
                "observedUsage": "warn",
                "unsatisfiableDisruptionBudgets": "warn",
            }
        )
    )
    code, out, _ = check(fleet, "--strategy", str(strategy), "-o", "json")
    assert code == EXIT_OK
    assert [(f["cluster"], f["source"], f["action"]) for f in json.loads(out)["findings"]] == [
        ("busy", "metric", "warn"),
        ("held", "pdb", "warn"),
    ]
    _, default, _ = check(fleet, "-o", "json")
    assert [f["action"] for f in json.loads(default)["findings"]] == ["block", "block"]


def test_a_partial_observation_is_a_partial_answer_named_with_its_reason(tmp_path: Path) -> None:
    fleet = write_fleet(tmp_path, half={"observationPartial": "apiserver 10.0.0.6:6443 timed out"})
    code, out, _ = check(fleet, "-o", "json")
    assert code == EXIT_PARTIAL
    doc = json.loads(out)
    assert doc["complete"] is False
    assert doc["partiallyObserved"] == [
        {"cluster": "half", "reason": "apiserver 10.0.0.6:6443 timed out"}
    ]
    code, table, _ = check(fleet)
    assert code == EXIT_PARTIAL
    assert "Observed only in part" in table and "apiserver 10.0.0.6:6443 timed out" in table
    assert "no workload uses an API" not in table
    assert "1 cluster(s) observed only in part" in table


def test_tables_name_the_source(tmp_path: Path) -> None:
    fleet = write_fleet(
        tmp_path,
        busy={"apiUsage": [usage(VAC_ALPHA, "1.35")]},
        soon={"apiUsage": [usage(VAC_BETA, "1.37")]},
    )
    code, table, _ = check(fleet)
    assert code == EXIT_OK
    assert "Observed on the clusters on the way to v1.35.0" in table
    assert "Removed APIs on the way" not in table  # no declared finding: no empty table
    flat = " ".join(table.split())
    assert "(apiserver metrics)" in flat and "metric" in flat
    assert "after v1.35.0" in flat and "1.37" in flat
    plan = runner.invoke(app, ["plan", "--snapshot", fleet, "-t", "v1.35.0"])
    flat = " ".join(plan.stdout.split())
    assert "blocked busy: step to v1.35.0 would break a client still using it: observed:" in flat
    assert "warning soon: observed: 1,204 requests" in flat
    assert "is deprecated, removed in 1.37" in flat


def test_a_snapshot_written_again_gives_the_same_findings(tmp_path: Path) -> None:
    fleet = write_fleet(
        tmp_path,
        busy={
            "apiUsage": [usage(VAC_ALPHA, "1.35"), usage(VAC_BETA, "1.37", quiet=True)],
            "disruptionBlockers": [
                {
                    "namespace": "shop",
                    "name": "web",
                    "reason": "minAvailable 2 equals the 2 expected pods",
                    "expectedPods": 2,
                }
            ],
            "observationPartial": "apiserver 10.0.0.6:6443 timed out",
        },
    )
    again = tmp_path / "again.yaml"
    again.write_text(dump_snapshot(load_snapshot(Path(fleet).read_text())))
    first, second = check(fleet, "-o", "json"), check(str(again), "-o", "json")
    assert first == second
    assert len(json.loads(first[1])["findings"]) == 3
