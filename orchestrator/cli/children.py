"""Servers the CLI starts for itself stop when it does, whichever signal ends it.

Ctrl-C reaches the whole foreground process group, so a child server sees it too; SIGTERM (a
service manager, ``kill PID``, a CI runner cancelling a job) reaches only the CLI, which used to
die at once and leave its Temporal dev server running. Two parts:

- ``sigterm_as_interrupt``: inside it SIGTERM takes the path Ctrl-C takes (the SIGINT handler in
  force, asyncio's included, else ``KeyboardInterrupt``), so every ``finally`` and context
  manager that stops a child runs; when the block is left the process exits 143 (128 + 15, what
  a shell reports for a process SIGTERM ended), so a caller still tells "terminated" from done.
- ``dev_server``: the Temporal dev server as our own child, not the SDK's: its stdout (the
  start-up banner) and its warnings go to a log file, never into the demo's output; it is
  stopped when the block is left, and the kernel sends it SIGTERM if the CLI dies without
  cleaning up (``PR_SET_PDEATHSIG``, SIGKILL and OOM included).

The local plane is not such a child: ``calibrator env up`` and the demo start it to outlive the
command (``env down`` or its TTL watchdog stop it). Only a plane still starting when the signal
arrives is stopped, by ``LocalPlane.up``'s own clean-up, which the interrupt reaches.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType

from orchestrator.cli.output import fail

EXIT_TERMINATED = 128 + signal.SIGTERM
PR_SET_PDEATHSIG = 1  # <sys/prctl.h>
START_TIMEOUT = 120.0  # seconds for the dev server to accept connections (the SDK's 5 s: too short)
STOP_TIMEOUT = 15.0  # seconds between SIGTERM and SIGKILL


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM behaves as Ctrl-C inside the block; leaving it after one exits 143."""
    terminated = False

    def on_sigterm(signum: int, frame: FrameType | None) -> None:
        nonlocal terminated
        terminated = True
        handler = signal.getsignal(signal.SIGINT)
        if callable(handler):  # default_int_handler raises; asyncio's cancels the main task
            handler(signal.SIGINT, frame)
            return
        raise KeyboardInterrupt  # SIGINT ignored (a background job): interrupt all the same

    previous = signal.signal(signal.SIGTERM, on_sigterm)
    try:
        yield
    except KeyboardInterrupt:
        if not terminated:
            raise
    finally:
        signal.signal(signal.SIGTERM, previous)
    if terminated:
        raise SystemExit(EXIT_TERMINATED)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0):
            return True
    except OSError:
        return False


_SIGNALS = frozenset({signal.SIGINT, signal.SIGTERM})


def _die_with_parent() -> Callable[[], None]:
    """The function the child runs before exec: SIGTERM from the kernel when the CLI ends.

    libc is loaded here, in the parent, so the child only makes its calls. The child also
    unblocks the signals ``_started`` blocked around the fork (a signal mask survives exec).
    """
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    parent = os.getpid()

    def in_child() -> None:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _SIGNALS)
        prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:  # the CLI ended before the prctl: nobody to serve
            os._exit(1)

    return in_child


@contextlib.contextmanager
def _started(argv: list[str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """``argv`` started with its output in ``log``, and stopped (``stop``) when the block ends.

    Ctrl-C and SIGTERM are held back from the fork until the process is in hand, so an
    interrupt can never leave a child that nothing will stop.
    """
    log.parent.mkdir(parents=True, exist_ok=True)
    held = signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS)
    try:
        with log.open("ab") as out:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=out,
                preexec_fn=_die_with_parent(),  # noqa: PLW1509 - signal calls in the child only
            )
    except BaseException:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
        raise
    try:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)  # a held signal is handled here
        yield proc
    finally:
        stop(proc)


def _tail(log: Path, lines: int = 5) -> str:
    try:
        text = log.read_text(errors="replace").strip().splitlines()
    except OSError:
        return "(no log)"
    return " | ".join(text[-lines:]) or "(empty log)"


@contextlib.contextmanager
def dev_server(binary: str, *, ui_port: int, log: Path) -> Iterator[str]:
    """A Temporal dev server (with its UI on ``ui_port``) for the block; yields its address.

    It listens on 127.0.0.1 only, keeps its state in memory, writes everything it prints to
    ``log`` (appended) and is stopped (SIGTERM, SIGKILL after ``STOP_TIMEOUT``) however the
    block ends. Not ready within ``START_TIMEOUT``, or exited early: one error line, exit 1.
    """
    port = _free_port()
    argv = [
        binary, "server", "start-dev",
        "--ip", "127.0.0.1", "--port", str(port), "--ui-port", str(ui_port),
        "--namespace", "default", "--log-level", "warn",
    ]  # fmt: skip
    with _started(argv, log) as proc:
        deadline = time.monotonic() + START_TIMEOUT
        while not _accepts(port):
            if proc.poll() is not None:
                fail(
                    f"the Temporal dev server exited with status {proc.returncode} before it "
                    f"was ready: {_tail(log)} (log: {log})",
                    code=1,
                )
            if time.monotonic() > deadline:
                fail(
                    f"the Temporal dev server did not accept connections within "
                    f"{START_TIMEOUT:.0f}s (log: {log})",
                    code=1,
                )
            time.sleep(0.2)
        yield f"127.0.0.1:{port}"


def stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL after ``STOP_TIMEOUT``; returns once the process is reaped."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=STOP_TIMEOUT)
