"""Servers the CLI starts stop with it: SIGTERM as well as Ctrl-C, and no child is left behind."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.cli import children
from orchestrator.cli.children import EXIT_TERMINATED, sigterm_as_interrupt
from orchestrator.localplane.components import resolve_bin_dir

ROOT = Path(__file__).parents[3]
CLI = "from orchestrator.cli.main import main; main()"


def test_sigterm_runs_the_clean_up_and_exits_143() -> None:
    cleaned = []
    with pytest.raises(SystemExit) as ended, sigterm_as_interrupt():
        try:
            signal.raise_signal(signal.SIGTERM)  # delivered to this thread, handled right after
            pytest.fail("SIGTERM did not interrupt the block")
        finally:
            cleaned.append("stopped the child")
    assert ended.value.code == EXIT_TERMINATED == 143
    assert cleaned == ["stopped the child"]
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # as it was before the block


def test_sigterm_takes_the_sigint_handler_in_force(monkeypatch: pytest.MonkeyPatch) -> None:
    """asyncio.run installs its own SIGINT handler (it cancels the main task): SIGTERM uses it."""
    seen: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: seen.append(signum))
    try:
        with pytest.raises(SystemExit) as ended, sigterm_as_interrupt():
            signal.raise_signal(signal.SIGTERM)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert seen == [signal.SIGINT]
    assert ended.value.code == EXIT_TERMINATED


def test_sigterm_inside_asyncio_run_cancels_the_main_task_and_exits_143() -> None:
    """The demo's --hold waits inside asyncio.run: SIGTERM reaches its ``finally`` there too."""
    import asyncio

    cleaned = []

    async def hold() -> None:
        try:
            signal.raise_signal(signal.SIGTERM)
            await asyncio.sleep(3600)
        finally:
            cleaned.append("closed the client")

    with pytest.raises(SystemExit) as ended, sigterm_as_interrupt():
        asyncio.run(hold())
    assert ended.value.code == EXIT_TERMINATED
    assert cleaned == ["closed the client"]


def test_ctrl_c_stays_ctrl_c() -> None:
    # Ctrl-C's own handler, whatever this process inherited: a process started in the background
    # by a non-interactive shell (CI scripts, `cmd &`) starts with SIGINT ignored, and Python
    # then installs no handler of its own, so the signal alone would prove nothing.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt), sigterm_as_interrupt():
            signal.raise_signal(signal.SIGINT)
    finally:
        signal.signal(signal.SIGINT, previous)


def test_a_dev_server_that_cannot_start_is_one_error_line(tmp_path: Path) -> None:
    log = tmp_path / "temporal.log"
    with pytest.raises(SystemExit) as ended, children.dev_server("/bin/false", ui_port=1, log=log):
        pytest.fail("a server that exits at once was ready")
    assert ended.value.code == 1


def _ppids() -> dict[int, int]:
    out = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[1].split()
            if fields[0] != "Z":
                out[int(entry)] = int(fields[1])
    return out


def _descendants(pid: int) -> set[int]:
    ppids = _ppids()
    found: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {p for p, parent in ppids.items() if parent in frontier} - found
        found |= frontier
    return found


def _running(pids: set[int]) -> set[int]:
    return pids & set(_ppids())


def _mentioning(text: str) -> set[int]:
    """Live processes whose command line names ``text`` (the plane's state dir)."""
    out = set()
    for pid in _ppids():
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if text in cmdline:
            out.add(pid)
    return out


def _lines(stream: object) -> Iterator[str]:
    yield from stream  # type: ignore[misc]


def _command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return "?"


def test_sigterm_to_the_demo_stops_its_temporal_dev_server_and_leaves_no_child(
    tmp_path: Path,
) -> None:
    """``calibrator demo --hold`` in a network namespace of its own, ended by SIGTERM.

    SIGTERM is sent once the demo's Temporal dev server is up and its local plane (state in
    ``tmp_path``) has started etcd: the CLI must exit 143 with its dev server and every plane
    process it was starting gone.
    """
    state = tmp_path / "plane"
    env = {
        **os.environ,
        "CALIBRATOR_STATE_DIR": str(state),
        "CALIBRATOR_BIN_DIR": str(resolve_bin_dir()),  # built or cached, as the plane tests do
        "PYTHONUNBUFFERED": "1",
    }
    # unshare and netns-run.sh exec: the pid we signal is the CLI's own.
    argv = ["unshare", "-n", str(ROOT / "tools" / "netns-run.sh"), str(ROOT)]
    proc = subprocess.Popen(
        [*argv, sys.executable, "-c", CLI, "demo", "--hold", "--ui-port", "8233"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        assert proc.stdout is not None
        for line in _lines(proc.stdout):
            lines.put(line)
        lines.put(None)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    out: list[str] = []
    try:
        deadline = time.monotonic() + 180
        while not any(line.startswith("Temporal UI: ") for line in out):
            line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
            assert line is not None, f"the demo ended before its UI was up: {''.join(out)}"
            out.append(line)
        servers = [p for p in _descendants(proc.pid) if _command(p) == "temporal"]
        assert servers, "no Temporal dev server among the demo's children"
        # Then the plane starts: etcd first, the API server and the managers seconds later.
        # The signal is sent once etcd runs, so the plane is caught mid-start (a plane that is
        # up is meant to outlive the demo; one still starting is not).
        while not any(_command(p) == "etcd" for p in _descendants(proc.pid)):
            assert proc.poll() is None, f"the demo ended early: {''.join(out)}"
            assert time.monotonic() < deadline, "the demo's plane did not start etcd"
            time.sleep(0.1)
        started = _descendants(proc.pid)
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
    reader.join(timeout=30)
    while (line := lines.get_nowait() if not lines.empty() else None) is not None:
        out.append(line)
    assert proc.stderr is not None
    err = proc.stderr.read()
    assert code == EXIT_TERMINATED, err
    assert "Traceback" not in err
    assert "Aborted!" not in err
    # The dev server's banner went to its log, not into the demo's output.
    text = "".join(out)
    assert "Temporal Server:" not in text and "Temporal CLI" not in text
    assert "Temporal CLI" in (state / "temporal-dev.log").read_text()
    left = _running(started) | _mentioning(str(state))
    assert not left, f"left running after SIGTERM: {[(p, _command(p)) for p in left]}"


def test_sigterm_to_env_up_stops_the_plane_it_was_starting(tmp_path: Path) -> None:
    """``calibrator env up`` ended by SIGTERM mid-start: 143, and no plane process left.

    A plane that is up outlives ``env up`` on purpose (``env down`` or --ttl stop it); one
    still starting is the command's to stop, as Ctrl-C always did.
    """
    state = tmp_path / "plane"
    env = {**os.environ, "CALIBRATOR_BIN_DIR": str(resolve_bin_dir())}
    argv = ["unshare", "-n", str(ROOT / "tools" / "netns-run.sh"), str(ROOT)]
    proc = subprocess.Popen(
        [*argv, sys.executable, "-c", CLI, "env", "up", "--state-dir", str(state)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        deadline = time.monotonic() + 120
        while not any(_command(p) == "etcd" for p in _descendants(proc.pid)):
            assert proc.poll() is None, "env up ended before it started etcd"
            assert time.monotonic() < deadline, "env up did not start etcd"
            time.sleep(0.1)
        started = _descendants(proc.pid)
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
    assert proc.stderr is not None
    err = proc.stderr.read()
    assert code == EXIT_TERMINATED, err
    assert "Traceback" not in err
    left = _running(started) | _mentioning(str(state))
    assert not left, f"left running after SIGTERM: {[(p, _command(p)) for p in left]}"
