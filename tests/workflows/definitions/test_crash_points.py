"""The crash tests' kill points (tests/integration/worker_process.py), without a plane.

The integration crash tests trust that a planned point fires exactly once across worker
restarts, only for its cluster, and that a kill point really ends the process with SIGKILL after
its marker is durable; a mistake there would make them pass without the crash they claim.
"""

from __future__ import annotations

import multiprocessing
import signal
from pathlib import Path

import pytest

from orchestrator.kube.backend.access import PatchRecord
from tests.integration.worker_process import CrashingBackend, Point, read_lines


def _backend(tmp_path: Path, *points: Point) -> CrashingBackend:
    return CrashingBackend(None, "ns", tmp_path / "writes.jsonl", tmp_path, points, dyn=object())


def test_a_point_is_parsed_with_its_cluster_and_unknown_names_are_refused() -> None:
    assert Point.parse("wait@a", kill=True) == Point("wait", "a", True)
    assert Point.parse("placement", kill=False).label == "placement"
    with pytest.raises(ValueError, match="unknown point"):
        Point.parse("pacth", kill=True)


def test_a_mark_fires_once_and_only_for_its_cluster(tmp_path: Path) -> None:
    backend = _backend(tmp_path, Point("untaint", "a", kill=False))
    backend._reached("untaint", "b", "other cluster")
    assert not (tmp_path / "untaint@a").exists()
    backend._reached("untaint", "a", "first")
    backend._reached("untaint", "a", "second")
    # A restarted worker with the same plan passes the used point by.
    _backend(tmp_path, Point("untaint", "a", kill=False))._reached("untaint", "a", "third")
    assert [m["detail"] for m in read_lines(tmp_path / "untaint@a")] == ["first"]


def _write(tmp: str) -> None:
    backend = _backend(Path(tmp), Point("patch", None, kill=True))
    backend.wrote_version(PatchRecord("a", "controlPlane", "v1.34.0", "s1", "Cluster"))


def test_a_kill_point_logs_the_write_marks_and_sigkills(tmp_path: Path) -> None:
    child = multiprocessing.get_context("fork").Process(target=_write, args=(str(tmp_path),))
    child.start()
    child.join(30)
    assert child.exitcode == -signal.SIGKILL
    assert [w["component"] for w in read_lines(tmp_path / "writes.jsonl")] == ["controlPlane"]
    (mark,) = read_lines(tmp_path / "patch")
    assert mark["pid"] == child.pid and mark["killed"] and mark["cluster"] == "a"
    # The restarted worker writes again (a different step) and is not killed.
    _write(str(tmp_path))
    assert len(read_lines(tmp_path / "writes.jsonl")) == 2
