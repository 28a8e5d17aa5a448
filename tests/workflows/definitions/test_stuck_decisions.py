"""Three rollouts stuck at once, answered with skip, retry and abort through the real CLI.

The in-memory fleet holds the clusters inside their control-plane step (a rollout that never
finishes) and the waits time out. This is the workflow half of the stuck-rollout drill whose
CAPI half runs in tests/integration/test_stuck_and_outage.py; it pins the documented end states
(docs/workflows.md, "Operator decisions") in seconds.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace

from typer.testing import CliRunner

from orchestrator.cli.main import app
from testkit.workflow_harness import FAST, Calibration, Harness, cluster, in_memory, strategy
from workflows.model import ClusterState, Phase, StepState, Timeouts

CLUSTERS = ("a-retry", "b-skip", "c-abort")
STUCK = replace(
    FAST,
    timeouts=Timeouts(
        activity_seconds=10, rollout_seconds=1.5, heartbeat_seconds=1, poll_seconds=0.01
    ),
)


async def _cli(c: Calibration, *args: str) -> str:
    """``calibrator ARGS --address <server>`` (the CLI runs its own event loop: a thread)."""
    address = c.client.service_client.config.target_host
    result = await asyncio.to_thread(CliRunner().invoke, app, [*args, "--address", address])
    assert result.exit_code == 0, (args, result.output)
    return str(result.stdout)


def test_stuck_clusters_end_as_documented_after_skip_retry_and_abort(harness: Harness) -> None:
    fleet = in_memory(*(cluster(name, "v1.32.9") for name in CLUSTERS))
    for name in CLUSTERS:
        fleet.hold(name)

    async def body(c: Calibration) -> None:
        handle = await c.start(
            "v1.33.5",
            strategy=strategy({"name": "fleet", "maxConcurrency": 3}, max_failures=3),
            options=STUCK,
        )
        waiting = await c.wait_for(
            handle.id,
            "every cluster waiting for a decision",
            lambda p: (
                p.phase == Phase.AWAITING_DECISIONS
                and all(c.state == ClusterState.WAITING_FOR_DECISION for c in p.clusters)
                and len(p.clusters) == len(CLUSTERS)
            ),
        )
        for name in CLUSTERS:
            stuck = waiting.cluster(name)
            assert stuck.tainted and fleet.has_upgrading_taint(name)
            assert stuck.message.startswith(f"{stuck.steps[0].description}: timed out")
            assert "last seen: control plane rolling out v1.33.5" in stuck.message

        # status names the cluster, the failed step and the reason, in JSON and in the table.
        doc = json.loads(await _cli(c, "status", handle.id, "-o", "json"))
        assert doc["phase"] == "AwaitingDecisions"
        for row in doc["clusters"]:
            assert row["state"] == "WaitingForDecision" and row["tainted"]
            assert row["steps"][0]["state"] == "Failed"
            assert "timed out" in row["steps"][0]["message"] and "last seen" in row["message"]
        table = await _cli(c, "status", handle.id)
        for name in CLUSTERS:
            line = next(ln for ln in table.splitlines() if name in ln)
            assert "WaitingForDecision" in line and "last seen" in line, line

        await _cli(c, "skip", handle.id, "--cluster", "b-skip", "--reason", "drill")
        await c.wait_for(
            handle.id,
            "b-skip skipped",
            lambda p: p.cluster("b-skip").state == ClusterState.SKIPPED,
        )
        fleet.release("a-retry")  # the cause is fixed
        await _cli(c, "retry", handle.id, "--cluster", "a-retry", "--reason", "fixed")
        await c.wait_for(
            handle.id,
            "a-retry succeeded",
            lambda p: p.cluster("a-retry").state == ClusterState.SUCCEEDED,
        )
        await _cli(c, "abort", handle.id, "--reason", "drill")
        result = await handle.result()

        assert result.phase == Phase.ABORTED
        retried = result.cluster("a-retry")
        assert not retried.tainted and not fleet.has_upgrading_taint("a-retry")
        assert retried.steps[0].attempts == 2
        assert fleet.patches[("a-retry", "controlPlane", "v1.33.5")] == 1  # not written twice
        for name, state in (("b-skip", ClusterState.SKIPPED), ("c-abort", ClusterState.ABORTED)):
            gave_up = result.cluster(name)
            assert gave_up.state == state, gave_up
            assert gave_up.tainted and fleet.has_upgrading_taint(name)
            assert "left tainted: the cluster may be mid-upgrade" in gave_up.message
            assert gave_up.steps[0].state == StepState.FAILED
        assert all(n == 1 for n in fleet.patches.values()), fleet.patches

    harness.run(fleet, body)
