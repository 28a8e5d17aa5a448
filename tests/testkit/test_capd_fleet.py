"""The benchmark fleet's provisioning repair (``capd_fleet.release_orphans``), on a fake client."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from testkit import capd_fleet
from tests.orchestrator.kube.fake_dyn import NS, FakeDyn

NOW = datetime(2026, 12, 6, 22, 30, tzinfo=UTC)


def machine(name: str, *, age: float = 600, phase: str = "Pending", **meta: Any) -> dict[str, Any]:
    created = (NOW - timedelta(seconds=age)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "metadata": {"name": name, "creationTimestamp": created, **meta},
        "spec": {"bootstrap": {"configRef": {"kind": "KubeadmConfig", "name": name}}},
        "status": {"phase": phase},
    }


def test_only_old_pending_machines_whose_bootstrap_config_is_gone_are_deleted() -> None:
    dyn = FakeDyn()
    dyn.add("KubeadmConfig", {"metadata": {"name": "has-config"}})
    dyn.add("Machine", machine("has-config"))  # Pending, its config there: still coming up
    dyn.add("Machine", machine("orphan"))  # the race: its config deleted, the Machine kept
    dyn.add("Machine", machine("young", age=10))  # maybe being created: left alone
    dyn.add("Machine", machine("running", phase="Running"))  # a config consumed long ago
    dyn.add("Machine", machine("deleting", deletionTimestamp="2026-12-06T22:29:00Z"))
    assert capd_fleet.release_orphans(dyn, NS, NOW) == ["orphan"]  # type: ignore[arg-type]
    assert sorted(name for _, name in dyn.objects["Machine"]) == [
        "deleting",
        "has-config",
        "running",
        "young",
    ]
    assert capd_fleet.release_orphans(dyn, NS, NOW) == []  # type: ignore[arg-type]
