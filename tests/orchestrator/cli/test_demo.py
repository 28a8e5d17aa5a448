"""Every ``calibrator demo`` run gets a namespace of its own and removes only earlier demos' ones."""

from __future__ import annotations

import os
import re
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from orchestrator.cli import demo

STARTED = datetime(2026, 12, 3, 11, 6, 55, tzinfo=UTC)
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


def test_each_run_has_its_own_dated_namespace() -> None:
    first = demo.run_namespace(STARTED)
    assert first == "calibrator-demo-20261203-110655"
    assert DNS_LABEL.match(first)
    assert demo.run_namespace(STARTED + timedelta(seconds=1)) != first
    # The same instant in another zone is the same name (UTC).
    cet = STARTED.astimezone(timezone(timedelta(hours=1)))
    assert demo.run_namespace(cet) == first


def test_the_namespace_is_labelled_and_the_workloads_are_placed_in_it() -> None:
    ns = demo.namespace_object("calibrator-demo-x")
    assert ns["metadata"]["labels"] == {demo.DEMO_LABEL: "true"}
    placed = demo.workloads("calibrator-demo-x")
    assert [w["metadata"] for w in placed] == [
        {"name": "web", "namespace": "calibrator-demo-x"},
        {"name": "volume-classes", "namespace": "calibrator-demo-x"},
    ]
    assert all("namespace" not in w["metadata"] for w in demo.WORKLOADS)  # not mutated


def _ns(name: str, labelled: bool) -> dict[str, Any]:
    labels = {demo.DEMO_LABEL: "true"} if labelled else {"team": "a"}
    return {"metadata": {"name": name, "labels": labels}}


def test_only_earlier_demo_namespaces_are_removed() -> None:
    current = demo.run_namespace(STARTED)
    found = [
        _ns(current, labelled=True),  # this run's (already created by an earlier attempt)
        _ns("calibrator-demo-20261203-100000", labelled=True),
        _ns("calibrator-demo", labelled=False),  # the fixed namespace of demos before this one
        _ns("calibrator-demo-mine", labelled=False),  # a user's, named alike: kept
        _ns("default", labelled=False),
        {"metadata": {"name": "kube-system"}},
    ]
    assert demo.earlier_demo_namespaces(found, current) == [
        "calibrator-demo",
        "calibrator-demo-20261203-100000",
    ]


def test_a_second_demo_on_the_same_plane_stops_with_one_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "localplane"
    with demo.one_demo_at_a_time(state):
        with pytest.raises(SystemExit) as info, demo.one_demo_at_a_time(state):
            pytest.fail("a second demo got the lock")
        assert info.value.code == 1
    assert capsys.readouterr().err == (
        f"error: another calibrator demo (pid {os.getpid()}) is running on this plane; "
        "wait for it or stop it first\n"
    )
    with demo.one_demo_at_a_time(state):  # released when the first run ends
        pass
