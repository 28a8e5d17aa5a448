"""``calibrator report``: the CLI contract around the pure renderer (tested in tests/.../report)."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from orchestrator.cli.main import app

ROOT = Path(__file__).parents[3]
FLEET = str(ROOT / "examples" / "fleet.yaml")
runner = CliRunner()


def test_a_file_and_live_flags_do_not_mix() -> None:
    result = runner.invoke(app, ["report", "-s", FLEET, "-t", "v1.35.0", "--context", "prod"])
    assert result.exit_code == 2
    assert "--snapshot reads a file; --context is for the live fleet" in result.stderr
    assert result.stdout == ""


def test_writes_the_page_to_stdout() -> None:
    result = runner.invoke(app, ["report", "-s", FLEET, "-t", "v1.35.0", "-o", "html"])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("<!DOCTYPE html>")
    assert "prod-ap-1" in result.stdout


def test_writes_the_page_to_a_file(tmp_path: Path) -> None:
    out = tmp_path / "fleet.html"
    result = runner.invoke(app, ["report", "-s", FLEET, "-t", "v1.35.0", "--output", str(out)])
    assert result.exit_code == 0, result.output
    assert result.stdout == ""
    assert "wrote" in result.stderr
    assert out.read_text().rstrip().endswith("</html>")


def test_bad_input_is_one_line_exit_2(tmp_path: Path) -> None:
    for args in (
        ["-s", FLEET, "-t", "v9.9.9"],
        ["-s", str(tmp_path / "missing.yaml"), "-t", "v1.35.0"],
        ["-s", FLEET, "-t", "v1.35.0", "--output", str(tmp_path / "no" / "dir" / "r.html")],
    ):
        result = runner.invoke(app, ["report", *args])
        assert result.exit_code == 2, args
        assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1
