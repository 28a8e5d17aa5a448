"""``calibrator env up --provider docker`` and the inotify limits: the flag, the lines, the JSON.

``dockerenv.up`` is replaced by a recorder (the real one starts dockerd and the plane: the
Docker tests run it); what it says through ``notice`` must reach stderr as whole lines, and its
``InotifyResult`` must reach the JSON document.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from orchestrator.cli.main import app
from orchestrator.localplane import dockerenv
from orchestrator.localplane.inotify import InotifyResult
from orchestrator.localplane.plane import PlaneStatus

LINE = (
    "raised fs.inotify.max_user_instances 128 -> 512 (kind's recommended value, so CAPD node "
    "containers can boot; host-wide: every process of this host and its containers, until "
    "reboot; --no-raise-inotify leaves it alone)"
)


@pytest.mark.parametrize(("flag", "allowed"), [([], True), (["--no-raise-inotify"], False)])
def test_env_up_docker_raises_by_default_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, flag: list[str], allowed: bool
) -> None:
    calls: list[dict[str, Any]] = []

    def fake_up(plane: Any, **kwargs: Any) -> dockerenv.DockerEnvUp:
        calls.append(kwargs)
        kwargs["notice"](LINE)
        result = InotifyResult(
            (("fs.inotify.max_user_instances", 128, 512),), (), (LINE,), kwargs["raise_inotify"]
        )
        status = PlaneStatus(plane.state_dir, plane.state_dir / "kubeconfig", [], {})
        return dockerenv.DockerEnvUp(status, "unix:///d.sock", tmp_path / "d", [], {}, result)

    monkeypatch.setattr(dockerenv, "up", fake_up)
    result = CliRunner().invoke(
        app,
        ["env", "up", "--provider", "docker", "--state-dir", str(tmp_path / "p"), "-o", "json",
         *flag],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert calls[0]["raise_inotify"] is allowed
    assert LINE in result.stderr.splitlines(), result.stderr  # one whole line, never wrapped
    doc = json.loads(result.stdout)
    assert doc["inotify"]["raised"] == [
        {"sysctl": "fs.inotify.max_user_instances", "from": 128, "to": 512}
    ]
    assert doc["inotify"]["raiseAllowed"] is allowed
