"""A network namespace of its own for each pytest-xdist worker.

The local management plane listens on fixed ports (etcd, kube-apiserver, the CAPI managers'
webhooks and metrics), so two planes cannot share a loopback. Rather than teaching every
component to take a port offset, each xdist worker moves itself into a fresh network namespace
before any test runs: it gets a loopback of its own, and every process and thread it starts
afterwards (plane, Temporal dev server, Chromium) inherits it. Nothing leaves the machine, and
the namespace disappears with the worker.
"""

from __future__ import annotations

import ctypes
import os
import subprocess

CLONE_NEWNET = 0x40000000  # <sched.h>; os.unshare arrives only in Python 3.12


def enter_private_network_namespace() -> None:
    """Move the calling thread (the worker's main thread, which runs the tests) into a new netns.

    Namespaces are per thread in Linux: threads started before the call stay where they were,
    which is harmless here (execnet's channel thread only reads its pipe); everything started
    after it inherits the new namespace.
    """
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWNET) != 0:
        errno = ctypes.get_errno()
        raise OSError(
            errno,
            f"pytest -n: each worker needs a network namespace of its own (unshare: "
            f"{os.strerror(errno)}); run as root, or run the suite without -n",
        )
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True, timeout=30)


def own_namespace() -> str:
    """The calling thread's network namespace, e.g. ``net:[4026532174]``."""
    return os.readlink("/proc/thread-self/ns/net")
