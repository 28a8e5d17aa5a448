"""Committed histories replay against today's workflow code (the determinism check of CI).

A failure here means a code change would break calibrations that are already running: make the
change replay-compatible (``workflow.patched``) or, if it is meant to be incompatible, re-record
with ``python -m tests.workflows.record_histories`` and explain why in the commit.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from temporalio.worker import Replayer

from tests.workflows.record_histories import HISTORIES, load
from workflows.payloads import DATA_CONVERTER
from workflows.worker import WORKFLOWS

FILES = sorted(HISTORIES.glob("*.json"))


def test_histories_are_committed() -> None:
    names = {p.stem for p in FILES}
    assert {
        "replay-rollout",
        "replay-retry",
        "replay-continue-as-new",
        "replay-continuous",
    } <= names, names
    assert any("~" in n for n in names), "child (ClusterUpgrade) histories are missing"


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_history_replays_deterministically(path: Path) -> None:
    history = load(path)
    replayer = Replayer(workflows=list(WORKFLOWS), data_converter=DATA_CONVERTER)
    result = asyncio.run(replayer.replay_workflow(history))
    assert result.replay_failure is None
