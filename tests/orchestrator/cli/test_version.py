"""``calibrator --version``: the package's version (pyproject's) and the pins it was built against."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import yaml
from typer.testing import CliRunner

import orchestrator
from orchestrator.cli.main import app
from orchestrator.cli.version import BUILT_AGAINST

ROOT = Path(__file__).parents[3]
runner = CliRunner()


def _pyproject_version() -> str:
    with (ROOT / "pyproject.toml").open("rb") as f:
        version: str = tomllib.load(f)["project"]["version"]
    return version


def test_the_package_version_is_pyprojects() -> None:
    assert orchestrator.__version__ == _pyproject_version()


def test_version_prints_the_package_version() -> None:
    result = runner.invoke(app, ["--version"])
    assert (result.exit_code, result.stderr) == (0, "")
    assert result.stdout == f"calibrator {_pyproject_version()}\n"


def test_version_json_and_yaml_name_the_pins() -> None:
    expected = {"version": _pyproject_version(), "builtAgainst": BUILT_AGAINST}
    as_json = runner.invoke(app, ["--version", "-o", "json"])
    assert (as_json.exit_code, as_json.stderr) == (0, "")
    assert json.loads(as_json.stdout) == expected
    as_yaml = runner.invoke(app, ["--version", "-o", "yaml"])
    assert yaml.safe_load(as_yaml.stdout) == expected


def test_the_pins_are_the_ones_tools_build_sh_builds() -> None:
    build = (ROOT / "tools" / "build.sh").read_text()
    pins = dict(re.findall(r"^([A-Z_]+_VERSION)=(\S+)", build, re.MULTILINE))
    assert {
        "kubernetes": pins["KUBERNETES_VERSION"],
        "clusterAPI": pins["CLUSTER_API_VERSION"],
        "etcd": pins["ETCD_VERSION"],
    } == BUILT_AGAINST


def test_a_top_level_output_without_version_is_bad_input() -> None:
    result = runner.invoke(app, ["-o", "json", "drift"])
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr == (
        "error: -o before the command is only for --version: give it after the command\n"
    )


def test_the_console_script_prints_the_version() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", "from orchestrator.cli.main import main; main()", "--version"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert (proc.returncode, proc.stderr) == (0, "")
    assert proc.stdout == f"calibrator {_pyproject_version()}\n"
