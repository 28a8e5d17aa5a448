import json
from pathlib import Path

import pytest

from orchestrator.localplane import dockerenv
from orchestrator.localplane.plane import LocalPlane
from orchestrator.localplane.processes import PlaneError


def test_node_archives_keeps_only_the_asked_versions(tmp_path: Path) -> None:
    images = tmp_path / "images"
    images.mkdir()
    for name in ("kind-base.tar", "node-v1.34.12.tar", "node-v1.35.8.tar"):
        (images / name).write_bytes(b"")
    names = [p.name for p in dockerenv.node_archives(tmp_path, None)]
    assert names == ["node-v1.34.12.tar", "node-v1.35.8.tar"]
    assert [p.name for p in dockerenv.node_archives(tmp_path, ["v1.34.12"])] == [
        "node-v1.34.12.tar"
    ]
    with pytest.raises(PlaneError, match=r"node-v1\.33\.0\.tar"):
        dockerenv.node_archives(tmp_path, ["v1.33.0"])


def test_only_a_docker_provider_file_names_an_engine(tmp_path: Path) -> None:
    plane = LocalPlane(tmp_path / "plane")
    assert dockerenv.recorded_engine(plane) is None
    plane.state_dir.mkdir()
    provider = plane.state_dir / dockerenv.PROVIDER_FILE
    provider.write_text(json.dumps({"provider": "in-memory"}))
    assert dockerenv.recorded_engine(plane) is None
    provider.write_text(json.dumps({"provider": "docker", "dockerStateDir": str(tmp_path / "d")}))
    engine = dockerenv.recorded_engine(plane)
    assert engine is not None and engine.state_dir == (tmp_path / "d").resolve()


def test_down_without_an_engine_forgets_the_provider_file(tmp_path: Path) -> None:
    plane = LocalPlane(tmp_path / "plane")
    plane.state_dir.mkdir()
    provider = plane.state_dir / dockerenv.PROVIDER_FILE
    provider.write_text(json.dumps({"provider": "docker", "dockerStateDir": str(tmp_path / "d")}))
    assert dockerenv.down(plane) == []  # nothing recorded runs: neither plane nor dockerd
    assert not provider.exists()
