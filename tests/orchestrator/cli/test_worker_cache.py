"""``calibrator worker`` builds its backend with the watch-fed cache, starts it, and stops it.

The one-shot commands never do (their backends LIST: tests/integration/test_watch_cache.py counts
their requests). Here the backend and the Temporal side are stand-ins: only the wiring is tested.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from orchestrator.cli import calibration
from orchestrator.cli.main import app
from orchestrator.kube.backend import fleet
from workflows import worker

runner = CliRunner()


class FakeBackend:
    def __init__(self, calls: list[str], kwargs: dict[str, Any]) -> None:
        self.calls = calls
        self.kwargs = kwargs

    def check_api(self) -> None:
        self.calls.append("check_api")

    def start(self) -> None:
        self.calls.append("start")

    def close(self) -> None:
        self.calls.append("close")


def test_the_worker_reads_a_cache_started_before_and_stopped_after_it_runs(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    calls: list[str] = []
    built: list[FakeBackend] = []

    def from_kubeconfig(*args: Any, **kwargs: Any) -> FakeBackend:
        built.append(FakeBackend(calls, kwargs))
        return built[-1]

    async def client(*args: Any, **kwargs: Any) -> object:
        return object()

    async def run_worker(client: object, backend: FakeBackend, **kwargs: Any) -> None:
        calls.append("run")

    monkeypatch.setattr(fleet.KubeFleetBackend, "from_kubeconfig", from_kubeconfig)
    monkeypatch.setattr(calibration, "_client", client)
    monkeypatch.setattr(worker, "run_worker", run_worker)
    for name in ("CALIBRATOR_METRICS_ADDRESS", "CALIBRATOR_HEALTH_ADDRESS", "OTEL_TRACES_EXPORTER"):
        monkeypatch.delenv(name, raising=False)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\n")
    result = runner.invoke(app, ["worker", "--kubeconfig", str(kubeconfig), "--namespace", "fleet"])
    assert result.exit_code == 0, result.output
    assert [b.kwargs.get("cache") for b in built] == [True]
    assert calls == ["check_api", "start", "run", "close"]
