"""Operator commands reach the right client call with the right arguments (no Temporal needed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from orchestrator.cli import calibration
from orchestrator.cli.main import app
from orchestrator.kube import client as kube_client
from workflows import client as wc
from workflows.client import ControlError
from workflows.model import Ack

runner = CliRunner()


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, tuple[Any, ...], str]]:
    recorded: list[tuple[str, tuple[Any, ...], str]] = []

    async def no_client(options: object) -> object:
        return object()

    def fake(name: str) -> Any:
        async def call(client: object, *args: Any, reason: str = "") -> Ack:
            if args[-1] == "refused":
                raise ControlError(f"{name} refused")
            recorded.append((name, args, reason))
            return Ack("Running", f"{name} ok")

        return call

    monkeypatch.setattr(calibration, "_client", no_client)
    for name in ("pause", "resume", "approve", "retry", "skip", "abort"):
        monkeypatch.setattr(wc, name, fake(name))
    return recorded


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (
            ["retry", "cal-1", "--cluster", "prod-eu-1", "--reason", "flake"],
            ("retry", ("cal-1", "prod-eu-1"), "flake"),
        ),
        (["skip", "cal-1", "--cluster", "prod-eu-1"], ("skip", ("cal-1", "prod-eu-1"), "")),
        (["approve", "cal-1", "--stage", "prod"], ("approve", ("cal-1", "prod"), "")),
        (["abort", "cal-1", "--reason", "stop"], ("abort", ("cal-1",), "stop")),
        (["pause", "cal-1"], ("pause", ("cal-1",), "")),
        (["resume", "cal-1"], ("resume", ("cal-1",), "")),
    ],
)
def test_operator_commands_call_the_client(
    calls: list[tuple[str, tuple[Any, ...], str]], argv: list[str], expected: tuple[Any, ...]
) -> None:
    result = runner.invoke(app, argv)
    assert result.exit_code == 0, result.output
    assert calls == [expected]


def test_a_refused_retry_is_one_error_line(calls: list[tuple[str, tuple[Any, ...], str]]) -> None:
    result = runner.invoke(app, ["retry", "cal-1", "--cluster", "refused"])
    assert result.exit_code == 2
    assert result.stderr.strip() == "error: retry refused"
    assert calls == []


@pytest.mark.parametrize(
    ("in_pod", "namespace", "expected"),
    [
        (True, None, "calibrator-system"),  # the Deployment: every namespace, plans at home
        (True, "fleet", "fleet"),  # --namespace: the fleet's one namespace, as before
        (False, None, "default"),  # by hand with a kubeconfig, every namespace: as before
        (False, "fleet", "fleet"),
    ],
)
def test_the_worker_keeps_plans_in_its_pods_namespace_unless_told(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    in_pod: bool,
    namespace: str | None,
    expected: str,
) -> None:
    (tmp_path / "namespace").write_text("calibrator-system\n")  # as the kubelet mounts it
    monkeypatch.setattr(kube_client, "SERVICE_ACCOUNT_DIR", tmp_path)
    kubeconfig = kube_client.IN_CLUSTER if in_pod else str(tmp_path / "kubeconfig")
    assert calibration.plan_namespace(kubeconfig, namespace) == expected
