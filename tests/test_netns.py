"""The per-worker network namespace really isolates the loopback (tests/netns.py)."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

CHILD = """
import socket, sys
from tests.netns import enter_private_network_namespace, own_namespace
before = own_namespace()
enter_private_network_namespace()
s = socket.socket()
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen()
print(before != own_namespace())
"""


def test_a_worker_binds_a_port_already_taken_on_the_callers_loopback() -> None:
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    try:
        child = subprocess.run(
            [sys.executable, "-c", CHILD, str(port)],
            cwd=REPO, capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
    finally:
        taken.close()
    assert child.returncode == 0, child.stderr
    assert child.stdout.strip() == "True"
