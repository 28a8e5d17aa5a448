"""Start, watch and stop the plane's processes by pid, with every wait bounded.

Each process runs in its own session (so a stop reaches its whole process group) and logs to one
file in the state directory; ``state.json`` records what ``up`` started, so ``down`` stops exactly
that and nothing else, even from another shell or after a crash.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path


class PlaneError(RuntimeError):
    """The local plane could not be brought to the requested state; the message says why."""


@dataclass
class ProcessRecord:
    """One started process as persisted in state.json."""

    name: str
    pid: int
    argv: list[str]
    log: str
    health_url: str
    started_at: float = field(default_factory=time.time)


def which(binary: str) -> str | None:
    """``binary`` on PATH or in the sbin directories (dockerd and iptables live there)."""
    return shutil.which(binary, path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")


def free_port() -> int:
    """A port nobody listens on right now (127.0.0.1 only)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def listening(port: int) -> bool:
    """Whether something accepts connections on 127.0.0.1:port."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover - not ours
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def start(
    name: str, argv: list[str], log: Path, health_url: str, env: dict[str, str] | None = None
) -> ProcessRecord:
    """Start ``argv`` detached, appending to ``log``."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        out.write(
            f"\n===== {time.strftime('%Y-%m-%dT%H:%M:%S')} starting {name}: {' '.join(argv)}\n".encode()
        )
        out.flush()
        proc = subprocess.Popen(
            argv,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env={**os.environ, **(env or {})},
        )
    return ProcessRecord(name, proc.pid, argv, str(log), health_url)


def stop(record: ProcessRecord, timeout: float = 20.0) -> None:
    """SIGTERM the process group, then SIGKILL after ``timeout``; reaps our own children."""
    if not alive(record.pid):
        _reap(record.pid)
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(record.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        _reap(record.pid)
        if not alive(record.pid):
            return
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(record.pid, signal.SIGKILL)
    for _ in range(50):
        _reap(record.pid)
        if not alive(record.pid):
            return
        time.sleep(0.1)
    raise PlaneError(f"{record.name} (pid {record.pid}) did not stop")


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


@dataclass(frozen=True)
class TLSClient:
    """Client credentials for the API server's health endpoints."""

    ca: Path
    cert: Path
    key: Path

    def context(self) -> ssl.SSLContext:
        """An SSL context trusting our CA and presenting the admin cert."""
        ctx = ssl.create_default_context(cafile=str(self.ca))
        ctx.load_cert_chain(str(self.cert), str(self.key))
        return ctx


def healthy(
    url: str, tls: TLSClient | None = None, timeout: float = 2.0, accept: str | None = None
) -> bool:
    """One GET (asking for ``accept`` when given); 2xx means healthy. Never raises."""
    try:
        ctx = tls.context() if tls and url.startswith("https") else None
        request = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
        with urllib.request.urlopen(request, timeout=timeout, context=ctx) as resp:
            return 200 <= int(resp.status) < 300
    except (OSError, urllib.error.URLError, ssl.SSLError, ValueError):
        return False


def wait_until(
    what: str,
    check: Callable[[], bool],
    timeout: float,
    record: ProcessRecord | None = None,
    interval: float = 0.25,
) -> float:
    """Poll ``check`` until true; fail fast if ``record``'s process died. Returns seconds waited."""
    began = time.monotonic()
    while True:
        if check():
            return time.monotonic() - began
        if record is not None and not alive(record.pid):
            raise PlaneError(
                f"{what}: process {record.name} exited; last log lines:\n{tail(Path(record.log))}"
            )
        if time.monotonic() - began > timeout:
            extra = f"; last log lines:\n{tail(Path(record.log))}" if record else ""
            raise PlaneError(f"{what}: not ready after {timeout:.0f}s{extra}")
        time.sleep(interval)


def tail(path: Path, lines: int = 15) -> str:
    """Last lines of a log, for error messages."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def save_records(path: Path, records: list[ProcessRecord], extra: dict[str, object]) -> None:
    """Write state.json atomically."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"processes": [asdict(r) for r in records], **extra}, indent=2))
    tmp.replace(path)


def load_records(path: Path) -> tuple[list[ProcessRecord], dict[str, object]]:
    """Read state.json (empty when absent or unreadable)."""
    try:
        raw = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return [], {}
    records = [ProcessRecord(**r) for r in raw.pop("processes", [])]
    return records, raw
