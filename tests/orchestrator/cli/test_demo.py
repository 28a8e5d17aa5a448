"""The demo starts from its drifted fleet every time (``_remove_previous``)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from rich.console import Console

from orchestrator.cli import demo


class _Clusters:
    """Clusters that CAPI deletes one LIST after the DELETE (deletion is asynchronous)."""

    def __init__(self, names: list[str]) -> None:
        self.items = list(names)
        self.deleting: list[str] = []
        self.deleted: list[str] = []

    def get(self, namespace: str, _request_timeout: int) -> Any:
        assert namespace == demo.NAMESPACE and _request_timeout > 0
        listed = list(self.items)
        for name in self.deleting:
            self.items.remove(name)
        self.deleting = []
        return SimpleNamespace(
            to_dict=lambda: {"items": [{"metadata": {"name": n}} for n in listed]}
        )

    def delete(self, name: str, namespace: str, _request_timeout: int) -> None:
        assert _request_timeout > 0
        self.deleted.append(name)
        self.deleting.append(name)


def _dyn(clusters: _Clusters) -> Any:
    return SimpleNamespace(resources=SimpleNamespace(get=lambda **_: clusters))


def test_a_previous_demos_clusters_are_deleted_and_waited_for() -> None:
    clusters = _Clusters(["demo-dev-1", "demo-prod-1"])
    console = Console(record=True, width=120)
    demo._remove_previous(console, _dyn(clusters))
    assert clusters.deleted == ["demo-dev-1", "demo-prod-1"]
    assert clusters.items == []
    assert "removed the previous demo's 2 clusters" in console.export_text()


def test_a_first_demo_deletes_nothing() -> None:
    clusters = _Clusters([])
    demo._remove_previous(Console(record=True), _dyn(clusters))
    assert clusters.deleted == []
