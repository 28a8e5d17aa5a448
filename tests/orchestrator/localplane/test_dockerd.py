"""``python3 -m orchestrator.localplane.dockerd``: what it prints for an engine that is not up."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.localplane.dockerd import main


def test_env_prints_the_export_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["env", "--state-dir", str(tmp_path)]) == 0
    assert (
        capsys.readouterr().out == f"export DOCKER_HOST=unix://{tmp_path.resolve()}/docker.sock\n"
    )


def test_status_of_an_engine_that_is_not_up_fails_with_its_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["status", "--state-dir", str(tmp_path)]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert (doc["pid"], doc["running"], doc["healthy"]) == (None, False, False)
    assert doc["log"] == f"{tmp_path.resolve()}/logs/dockerd.log"


def test_the_module_runs_as_the_command_line_in_the_docs(tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "orchestrator.localplane.dockerd", "down"]
    done = subprocess.run(
        [*argv, "--state-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr  # nothing recorded: nothing to stop
