import io
import json
import tarfile
from pathlib import Path

import pytest

from orchestrator.localplane import dockerenv
from orchestrator.localplane.dockerd import archive_images
from orchestrator.localplane.plane import LocalPlane
from orchestrator.localplane.processes import PlaneError


def _archive(path: Path, manifest: object) -> Path:
    data = json.dumps(manifest).encode()
    with tarfile.open(path, "w") as tar:
        info = tarfile.TarInfo("manifest.json")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return path


def test_archive_images_maps_each_tag_to_its_config_digest(tmp_path: Path) -> None:
    archive = _archive(
        tmp_path / "a.tar",
        [
            {"Config": "abc.json", "RepoTags": ["fleet-calibrator/haproxy:bookworm-r1"]},
            {"Config": "blobs/sha256/def", "RepoTags": ["kindest/node:v1.34.12", "x:y"]},
            {"Config": "ghi.json", "RepoTags": None},
        ],
    )
    assert archive_images(archive) == {
        "fleet-calibrator/haproxy:bookworm-r1": "sha256:abc",
        "kindest/node:v1.34.12": "sha256:def",
        "x:y": "sha256:def",
    }


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
