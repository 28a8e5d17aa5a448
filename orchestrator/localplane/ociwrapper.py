"""OCI runtime wrapper: drop the capabilities this kernel's bounding set lacks, then exec runc.

Why it exists: a VM whose capability bounding set lacks a capability (here CAP_SYS_RESOURCE) makes
runc fail every container that asks for it, with ``unable to apply caps: operation not permitted``.
``docker run --privileged`` asks for every capability Docker knows, so kind nodes and CAPD machines
(both privileged) cannot start. dockerd is started with this wrapper as its default runtime
(``--add-runtime`` / ``--default-runtime``): before ``create`` and ``run`` it rewrites the bundle's
``config.json``, before ``exec`` the ``--process`` file, removing from every capability set the
capabilities that the wrapper's own bounding set does not hold (a process cannot grant what it does
not have, so nothing is lost), then replaces itself with runc with the same arguments.

Invoked as ``python3 -I ociwrapper.py --runc /path/to/runc -- <runc arguments>``; it imports only
the standard library so that it runs with ``-I`` (no site packages, no PYTHONPATH).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

# Linux capability numbers (include/uapi/linux/capability.h); the index is the bit number.
CAPABILITIES: tuple[str, ...] = (
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_DAC_READ_SEARCH",
    "CAP_FOWNER",
    "CAP_FSETID",
    "CAP_KILL",
    "CAP_SETGID",
    "CAP_SETUID",
    "CAP_SETPCAP",
    "CAP_LINUX_IMMUTABLE",
    "CAP_NET_BIND_SERVICE",
    "CAP_NET_BROADCAST",
    "CAP_NET_ADMIN",
    "CAP_NET_RAW",
    "CAP_IPC_LOCK",
    "CAP_IPC_OWNER",
    "CAP_SYS_MODULE",
    "CAP_SYS_RAWIO",
    "CAP_SYS_CHROOT",
    "CAP_SYS_PTRACE",
    "CAP_SYS_PACCT",
    "CAP_SYS_ADMIN",
    "CAP_SYS_BOOT",
    "CAP_SYS_NICE",
    "CAP_SYS_RESOURCE",
    "CAP_SYS_TIME",
    "CAP_SYS_TTY_CONFIG",
    "CAP_MKNOD",
    "CAP_LEASE",
    "CAP_AUDIT_WRITE",
    "CAP_AUDIT_CONTROL",
    "CAP_SETFCAP",
    "CAP_MAC_OVERRIDE",
    "CAP_MAC_ADMIN",
    "CAP_SYSLOG",
    "CAP_WAKE_ALARM",
    "CAP_BLOCK_SUSPEND",
    "CAP_AUDIT_READ",
    "CAP_PERFMON",
    "CAP_BPF",
    "CAP_CHECKPOINT_RESTORE",
)

CAP_SETS = ("bounding", "effective", "inheritable", "permitted", "ambient")

# runc's global options that take a value (``runc --help``); all others are booleans.
_GLOBAL_WITH_VALUE = {"--root", "--log", "--log-format", "--criu", "--rootless"}


def missing_capabilities(bounding_mask: int) -> frozenset[str]:
    """Names of the known capabilities whose bit is clear in ``bounding_mask``."""
    return frozenset(name for bit, name in enumerate(CAPABILITIES) if not bounding_mask >> bit & 1)


def own_bounding_mask(status: str) -> int:
    """The ``CapBnd`` mask from the text of ``/proc/self/status``."""
    for line in status.splitlines():
        if line.startswith("CapBnd:"):
            return int(line.split()[1], 16)
    raise ValueError("no CapBnd line in /proc/self/status")


def strip_capabilities(capabilities: dict[str, object], missing: frozenset[str]) -> bool:
    """Remove ``missing`` from every capability set in place; True when something was removed."""
    changed = False
    for key in CAP_SETS:
        caps = capabilities.get(key)
        if isinstance(caps, list):
            kept = [c for c in caps if c not in missing]
            if len(kept) != len(caps):
                capabilities[key] = kept
                changed = True
    return changed


def _option_value(args: list[str], names: tuple[str, ...]) -> str | None:
    """The value of the first of ``names`` in ``args`` (``--x v`` or ``--x=v``), else None."""
    for i, arg in enumerate(args):
        for name in names:
            if arg == name and i + 1 < len(args):
                return args[i + 1]
            if arg.startswith(name + "="):
                return arg[len(name) + 1 :]
    return None


def target_file(args: list[str]) -> Path | None:
    """The JSON file that carries the capabilities for this runc invocation, if any.

    ``create``/``run`` read ``<bundle>/config.json`` (bundle from ``--bundle``/``-b``, default the
    working directory); ``exec`` reads the ``--process``/``-p`` file (without one, the process comes
    from command-line flags, which carry no capabilities beyond the container's own).
    """
    i = 0
    while i < len(args):
        arg = args[i]
        if not arg.startswith("-"):
            break
        i += 2 if arg in _GLOBAL_WITH_VALUE else 1
    if i >= len(args):
        return None
    command, rest = args[i], args[i + 1 :]
    if command in ("create", "run"):
        bundle = _option_value(rest, ("--bundle", "-b")) or "."
        return Path(bundle) / "config.json"
    if command == "exec":
        process = _option_value(rest, ("--process", "-p"))
        return Path(process) if process else None
    return None


def rewrite(path: Path, missing: frozenset[str]) -> None:
    """Strip ``missing`` capabilities from an OCI config.json or process.json file in place."""
    doc = json.loads(path.read_text())
    process = doc.get("process", doc) if "ociVersion" in doc else doc
    caps = process.get("capabilities") if isinstance(process, dict) else None
    if isinstance(caps, dict) and strip_capabilities(caps, missing):
        tmp = path.with_name(path.name + ".fc-tmp")
        tmp.write_text(json.dumps(doc))
        os.replace(tmp, path)


def main(argv: list[str]) -> None:
    """Parse ``--runc PATH --`` then rewrite the target file and exec runc."""
    if len(argv) < 3 or argv[0] != "--runc" or argv[2] != "--":
        sys.stderr.write("usage: ociwrapper.py --runc PATH -- RUNC-ARGS...\n")
        sys.exit(2)
    runc, args = argv[1], argv[3:]
    target = target_file(args)
    if target is not None and target.is_file():
        missing = missing_capabilities(own_bounding_mask(Path("/proc/self/status").read_text()))
        if missing:
            rewrite(target, missing)
    os.execv(runc, [runc, *args])


if __name__ == "__main__":
    main(sys.argv[1:])
