"""The container arguments in deploy/worker are ones the real ``calibrator`` CLI accepts.

A renamed or removed flag then fails here, in CI, instead of in a CrashLoopBackOff after a
rollout. The arguments are parsed by the same Click command tree the entry point runs; nothing
is executed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
import yaml

from orchestrator.cli.main import app

DEPLOYMENT = Path(__file__).resolve().parents[3] / "deploy" / "worker" / "deployment.yaml"


def _container() -> dict[str, Any]:
    deployment = yaml.safe_load(DEPLOYMENT.read_text())
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert isinstance(container, dict)
    return container


def test_the_worker_container_arguments_parse_with_the_cli() -> None:
    name, *rest = _container()["args"]
    assert name == "worker"
    group = typer.main.get_command(app)
    command = group.commands[name]  # type: ignore[attr-defined]
    with command.make_context(name, list(rest)) as ctx:
        assert ctx.params["metrics_address"] == "0.0.0.0:9464"
        assert ctx.params["health_address"] == "0.0.0.0:9465"


def test_the_metrics_and_health_ports_are_the_ones_the_arguments_bind() -> None:
    container = _container()
    args = container["args"]
    declared = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert set(declared) == {"metrics", "health"}
    for name, container_port in declared.items():
        port = args[args.index(f"--{name}-address") + 1].rsplit(":", 1)[1]
        assert container_port == int(port), name
