"""The Engine API client's pure part: which images a ``docker save`` archive holds."""

import io
import json
import tarfile
from pathlib import Path

from orchestrator.localplane.dockerapi import archive_images


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
