"""``calibrator env down`` on a state dir with nothing running (it once failed on a NameError)."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from orchestrator.cli.main import app


def test_env_down_with_nothing_running(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["env", "down", "--state-dir", str(tmp_path / "plane")])
    assert result.exit_code == 0, result.output
    assert "stopped: nothing was running" in result.stdout
