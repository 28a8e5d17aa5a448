"""The kernel's inotify limits that CAPD docker clusters run into, checked and (as root) raised.

Every node container runs systemd and a kubelet, and each takes inotify instances and watches
that the kernel counts per user across the host and all its containers (uid 0 here). At
``fs.inotify.max_user_instances`` = 128 this machine held two CAPD clusters; a third node's
systemd exited at boot ("Failed to create control group inotify object: Too many open files")
and CAPD only showed its Machine stuck in Provisioning (docs/kind.md, "How many clusters this
machine holds"). kind's known-issues page gives the remedy: raise ``fs.inotify.max_user_watches``
to 524288 and ``fs.inotify.max_user_instances`` to 512 on the host.

``calibrator env up --provider docker`` therefore raises each limit that is below kind's value,
but only when it can (root) and was not told not to (``--no-raise-inotify``), and never
silently: the change is host-wide (every process of the host and its containers gets the new
limit, until reboot), so each one is said on stderr with its old and new value and recorded in
the JSON output. Otherwise it warns with the exact ``sysctl`` command. A limit already at or above
the value is never lowered.

``decide`` is the pure rule (unit-tested as a table); the kernel is reached through the small
``KernelLimits`` port (``ProcSysLimits`` in production), so tests never touch /proc.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

# kind's recommended host values (its known-issues page, "Pod errors due to too many open files").
RECOMMENDED: dict[str, int] = {
    "fs.inotify.max_user_watches": 524288,
    "fs.inotify.max_user_instances": 512,
}
HOST_WIDE = "host-wide: every process of this host and its containers, until reboot"


class KernelLimits(Protocol):
    """Reads and writes sysctls by their dotted name; ``read`` gives None when unreadable."""

    def read(self, name: str) -> int | None:
        """The current value, or None when it cannot be read."""
        ...

    def write(self, name: str, value: int) -> None:
        """Set the value (raises OSError when the kernel refuses)."""
        ...


@dataclass(frozen=True)
class ProcSysLimits:
    """``KernelLimits`` over /proc/sys (``fs.inotify.max_user_watches`` -> fs/inotify/...)."""

    root: Path = Path("/proc/sys")

    def _path(self, name: str) -> Path:
        return self.root.joinpath(*name.split("."))

    def read(self, name: str) -> int | None:
        """The integer in the sysctl's file, or None (missing, unreadable, not a number)."""
        try:
            return int(self._path(name).read_text().strip())
        except (OSError, ValueError):
            return None

    def write(self, name: str, value: int) -> None:
        """Write the new value as ``sysctl -w`` does."""
        self._path(name).write_text(f"{value}\n")


@dataclass(frozen=True)
class LimitDecision:
    """What to do about the limits: raise these (name, old, new), warn about these (name, old)."""

    to_raise: tuple[tuple[str, int, int], ...]
    to_warn: tuple[tuple[str, int], ...]


def decide(current: Mapping[str, int | None], *, root: bool, may_raise: bool) -> LimitDecision:
    """Pure: each limit below kind's value is raised (root, allowed) or warned about; else kept.

    An unreadable limit (None) is left alone: nothing to compare, and nothing is written blind.
    """
    low = [
        (name, value)
        for name, wanted in RECOMMENDED.items()
        if (value := current.get(name)) is not None and value < wanted
    ]
    if root and may_raise:
        return LimitDecision(tuple((n, v, RECOMMENDED[n]) for n, v in low), ())
    return LimitDecision((), tuple(low))


def sysctl_command(names: list[str]) -> str:
    """``sysctl -w a=1 b=2``: the command that sets ``names`` to kind's values."""
    return "sysctl -w " + " ".join(f"{n}={RECOMMENDED[n]}" for n in names)


@dataclass(frozen=True)
class InotifyResult:
    """What ``check_and_raise`` changed and what it left below kind's values, with the lines said."""

    raised: tuple[tuple[str, int, int], ...]
    below: tuple[tuple[str, int], ...]
    messages: tuple[str, ...]
    raise_allowed: bool

    def to_json(self) -> dict[str, Any]:
        """The ``inotify`` field of ``env up -o json``."""
        return {
            "raised": [{"sysctl": n, "from": old, "to": new} for n, old, new in self.raised],
            "belowRecommended": [
                {"sysctl": n, "value": v, "recommended": RECOMMENDED[n]} for n, v in self.below
            ],
            "raiseAllowed": self.raise_allowed,
        }


def check_and_raise(limits: KernelLimits, *, root: bool, may_raise: bool) -> InotifyResult:
    """Read both limits, raise what ``decide`` says, and say every change and every shortfall.

    A write the kernel refuses (a read-only /proc/sys in a container, a user namespace) turns
    that limit into a warning with the reason, so the user still gets the command to run.
    """
    current = {name: limits.read(name) for name in RECOMMENDED}
    decision = decide(current, root=root, may_raise=may_raise)
    raised: list[tuple[str, int, int]] = []
    below = list(decision.to_warn)
    messages: list[str] = []
    refused: list[str] = []
    for name, old, new in decision.to_raise:
        try:
            limits.write(name, new)
        except OSError as err:
            below.append((name, old))
            refused.append(f"{name}: {err.strerror or err}")
            continue
        raised.append((name, old, new))
        messages.append(
            f"raised {name} {old} -> {new} (kind's recommended value, so CAPD node containers "
            f"can boot; {HOST_WIDE}; --no-raise-inotify leaves it alone)"
        )
    if below:
        names = [n for n, _ in below]
        values = ", ".join(f"{n} is {v}" for n, v in below)
        why = (
            f"could not raise it ({'; '.join(refused)})"
            if refused
            else "not raised: --no-raise-inotify"
            if root
            else "not raised: not root"
        )
        messages.append(
            f"warning: {values}, below kind's recommended value; CAPD node containers share these "
            "with every root process on this host (at 128 instances only about 2 CAPD docker "
            f"clusters boot); {why}. Raise them ({HOST_WIDE}) as root: `{sysctl_command(names)}`"
        )
    return InotifyResult(tuple(raised), tuple(below), tuple(messages), root and may_raise)
