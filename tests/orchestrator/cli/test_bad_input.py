"""The bad-input corpus (testkit/bad_cli_inputs.py): every case through the real CLI entry.

Snapshot files, strategy files and flags a new user (or an attacker) might hand the offline
commands. Each case must end with exit code 2, exactly one ``error:`` line on stderr, no
traceback, nothing on stdout and no file written. Click's usage errors (``-o xml``, a missing
option) keep Click's own multi-line box; they are checked for exit 2 and no traceback only.
No case asserts a duration: the limits make each one fail fast or finish, whatever the machine.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from orchestrator.cli.main import app
from orchestrator.domain.documents import MAX_DOCUMENT_BYTES
from testkit.bad_cli_inputs import (
    CALIBRATE_STRATEGIES,
    FLAGS,
    FLEET,
    SNAPSHOT,
    SNAPSHOTS,
    STRATEGIES,
    TARGET,
    USAGE,
    large_snapshot_json,
)

runner = CliRunner()


def _files(root: Path) -> set[Path]:
    return set(root.rglob("*"))


def _invoke(argv: list[str], tmp_path: Path) -> tuple[int, str, str, BaseException | None]:
    good = tmp_path / "fleet.yaml"
    good.write_text(yaml.safe_dump(FLEET))
    argv = [str(good) if a == SNAPSHOT else a for a in argv]
    before = _files(tmp_path)
    result = runner.invoke(app, argv)
    assert _files(tmp_path) == before, "the command wrote a file"
    return result.exit_code, result.stdout, result.stderr, result.exception


def _assert_one_error(
    outcome: tuple[int, str, str, BaseException | None], message: str | None
) -> None:
    code, stdout, stderr, exception = outcome
    assert exception is None or isinstance(exception, SystemExit), repr(exception)
    assert "Traceback" not in stderr
    assert code == 2, stderr
    assert stdout == ""
    if message is None:
        return
    lines = stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr[:500]
    assert message in lines[0], lines[0]
    assert len(lines[0]) <= 420


@pytest.mark.parametrize(
    ("text", "message"), [c[1:] for c in SNAPSHOTS], ids=[c[0] for c in SNAPSHOTS]
)
@pytest.mark.parametrize("command", ["plan", "place"])
def test_bad_snapshot_files(command: str, text: str | bytes, message: str, tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    argv = [command, "--snapshot", str(path)] + (["--target", TARGET] if command == "plan" else [])
    _assert_one_error(_invoke(argv, tmp_path), message)


@pytest.mark.parametrize(
    ("text", "message"), [c[1:] for c in STRATEGIES], ids=[c[0] for c in STRATEGIES]
)
def test_bad_strategy_files(text: str, message: str, tmp_path: Path) -> None:
    path = tmp_path / "strategy.yaml"
    path.write_text(text)
    argv = ["plan", "-s", SNAPSHOT, "-t", TARGET, "--strategy", str(path)]
    _assert_one_error(_invoke(argv, tmp_path), message)


@pytest.mark.parametrize("case", CALIBRATE_STRATEGIES)
def test_calibrate_refuses_a_bad_strategy_before_connecting(case: str, tmp_path: Path) -> None:
    text, message = {c[0]: c[1:] for c in STRATEGIES}[case]
    path = tmp_path / "strategy.yaml"
    path.write_text(text)
    argv = ["calibrate", "-t", TARGET, "--strategy", str(path), "--address", "127.0.0.1:9"]
    _assert_one_error(_invoke(argv, tmp_path), message)


@pytest.mark.parametrize(("argv", "message"), [c[1:] for c in FLAGS], ids=[c[0] for c in FLAGS])
def test_bad_flags(argv: list[str], message: str, tmp_path: Path) -> None:
    _assert_one_error(_invoke(argv, tmp_path), message)


@pytest.mark.parametrize("argv", [c[1] for c in USAGE], ids=[c[0] for c in USAGE])
def test_usage_errors_keep_clicks_box(argv: list[str], tmp_path: Path) -> None:
    _assert_one_error(_invoke(argv, tmp_path), None)


def test_a_file_past_the_size_limit_is_refused_unread(tmp_path: Path) -> None:
    path = tmp_path / "huge.yaml"
    with path.open("wb") as handle:  # sparse: no disk, no memory
        handle.truncate(MAX_DOCUMENT_BYTES + 1)
    _assert_one_error(
        _invoke(["drift", "--snapshot", str(path)], tmp_path), "larger than the 64 MiB limit"
    )


def test_a_50_mb_snapshot_is_parsed_in_bounded_time_and_memory(tmp_path: Path) -> None:
    """50 MB of JSON (under the 64 MiB limit) is read and validated to its last entry.

    One duplicate cluster name at the very end proves every entry was looked at: it exits 2
    with that one error, after a linear duplicate check (the quadratic one took minutes).
    """
    path = tmp_path / "fleet.json"
    path.write_text(large_snapshot_json(25_000, 165_000, duplicate_last=True))
    size = path.stat().st_size
    assert 48_000_000 < size < MAX_DOCUMENT_BYTES, size
    _assert_one_error(
        _invoke(["drift", "--snapshot", str(path)], tmp_path),
        "duplicate cluster name(s) 'cluster-024999'",
    )


def test_corpus_size() -> None:
    cases = len(SNAPSHOTS) + len(STRATEGIES) + len(FLAGS) + len(CALIBRATE_STRATEGIES)
    assert cases >= 40
