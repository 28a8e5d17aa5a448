"""A calibration through the worker deployed in a kind management cluster, on a real CAPD
cluster (issue 26, item 8): the CI-sized run of ``benchmarks/bench_kind_fleet.py``.

One managed-topology cluster at v1.34.12 runs an app behind a PodDisruptionBudget where
``calibrator place`` put it; ``calibrator calibrate --wait`` (a canary of one) takes it to
v1.35.8 through the worker pods, and the pod running its step is deleted mid-step. Every check
of the benchmark must hold: the run Completed with exit 0, nodes Ready at the target, each
Machine replaced once and each patch done once, the PDB never broken in any sample, the taint
from before the first patch until the last step and gone after, a placement after each step,
the deleted pod replaced, the run visible with its search attributes in the Temporal UI's API,
CoreDNS Ready at the new minor. The six-cluster run (two stages, maxConcurrency 3) is the
benchmark: ``tools/e2e-kind.sh run``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.kind


@pytest.mark.timeout(3600)
def test_a_cluster_calibrated_through_the_deployed_worker(tmp_path: Path) -> None:
    state = Path(os.environ["CALIBRATOR_KIND_STATE"])
    out = tmp_path / "fleet.json"
    # A process of its own, as tools/e2e-kind.sh runs it: its exit status is the verdict.
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_kind_fleet", "--clusters", "1",
         "--docker-state-dir", str(state / "docker"), "--json", str(out)],
        check=False, timeout=3300,
    )  # fmt: skip
    report = json.loads(out.read_text())
    print(json.dumps({k: report.get(k) for k in ("create", "figures", "workerStats")}, indent=1))
    failed = {name: check for name, check in report["checks"].items() if not check["ok"]}
    assert not failed, json.dumps(failed, indent=1)
    assert done.returncode == 0
    assert set(report["checks"]) == {
        "run_completed",
        "nodes_ready_at_target",
        "no_step_done_twice",
        "at_target_untouched",
        "pdb_never_violated",
        "taint_window",
        "placement_after_each_step",
        "worker_pod_deleted_mid_run",
        "temporal_ui",
        "coredns_on_topology_clusters",
    }
    assert report["placedOn"] == ["k1"]
