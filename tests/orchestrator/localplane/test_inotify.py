"""The inotify rule of ``env up --provider docker``: raise (root, allowed), warn, or keep.

The kernel is the ``KernelLimits`` port, faked here; /proc is never touched (``ProcSysLimits`` is
tested against a directory laid out like /proc/sys).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from orchestrator.localplane import inotify
from orchestrator.localplane.inotify import ProcSysLimits, check_and_raise, decide

WATCHES = "fs.inotify.max_user_watches"
INSTANCES = "fs.inotify.max_user_instances"


@dataclass
class FakeKernel:
    """Sysctl values in a dict; ``refuse`` makes writes fail as a read-only /proc/sys does."""

    values: dict[str, int | None]
    refuse: bool = False
    writes: list[tuple[str, int]] = field(default_factory=list)

    def read(self, name: str) -> int | None:
        return self.values.get(name)

    def write(self, name: str, value: int) -> None:
        if self.refuse:
            raise OSError(30, "Read-only file system")
        self.writes.append((name, value))
        self.values[name] = value


@pytest.mark.parametrize(
    ("watches", "instances", "root", "may_raise", "raised", "warned"),
    [
        # This VM as found: instances low, watches low; root and allowed -> both raised.
        (192546, 128, True, True, [(WATCHES, 192546, 524288), (INSTANCES, 128, 512)], []),
        # Only what is below is raised; a higher value is never lowered.
        (1048576, 128, True, True, [(INSTANCES, 128, 512)], []),
        (524288, 8192, True, True, [], []),
        (524287, 512, True, True, [(WATCHES, 524287, 524288)], []),
        # Not root, or --no-raise-inotify: a warning naming each low limit, nothing written.
        (192546, 128, False, True, [], [(WATCHES, 192546), (INSTANCES, 128)]),
        (192546, 128, True, False, [], [(WATCHES, 192546), (INSTANCES, 128)]),
        (524288, 511, False, False, [], [(INSTANCES, 511)]),
        # Already fine: nothing to say either way.
        (524288, 512, False, True, [], []),
        # Unreadable: nothing to compare, nothing written blind.
        (None, None, True, True, [], []),
        (None, 128, True, True, [(INSTANCES, 128, 512)], []),
    ],
)
def test_decide(
    watches: int | None,
    instances: int | None,
    root: bool,
    may_raise: bool,
    raised: list[tuple[str, int, int]],
    warned: list[tuple[str, int]],
) -> None:
    decision = decide({WATCHES: watches, INSTANCES: instances}, root=root, may_raise=may_raise)
    assert list(decision.to_raise) == raised
    assert list(decision.to_warn) == warned


def test_as_root_each_change_is_one_line_with_old_new_and_host_wide() -> None:
    kernel = FakeKernel({WATCHES: 192546, INSTANCES: 128})
    result = check_and_raise(kernel, root=True, may_raise=True)
    assert kernel.writes == [(WATCHES, 524288), (INSTANCES, 512)]
    assert len(result.messages) == 2
    assert result.messages[0].startswith(f"raised {WATCHES} 192546 -> 524288 (")
    assert result.messages[1].startswith(f"raised {INSTANCES} 128 -> 512 (")
    for line in result.messages:
        assert "host-wide" in line and "\n" not in line
    assert result.to_json() == {
        "raised": [
            {"sysctl": WATCHES, "from": 192546, "to": 524288},
            {"sysctl": INSTANCES, "from": 128, "to": 512},
        ],
        "belowRecommended": [],
        "raiseAllowed": True,
    }
    # Run again: nothing left to raise, nothing said.
    again = check_and_raise(kernel, root=True, may_raise=True)
    assert again.messages == () and again.raised == () and len(kernel.writes) == 2


@pytest.mark.parametrize(
    ("root", "may_raise", "refuse", "why"),
    [
        (False, True, False, "not raised: not root"),
        (True, False, False, "not raised: --no-raise-inotify"),
        (True, True, True, f"could not raise it ({WATCHES}: Read-only file system; "),
    ],
)
def test_otherwise_one_warning_with_the_exact_sysctl_command(
    root: bool, may_raise: bool, refuse: bool, why: str
) -> None:
    kernel = FakeKernel({WATCHES: 192546, INSTANCES: 128}, refuse=refuse)
    result = check_and_raise(kernel, root=root, may_raise=may_raise)
    assert kernel.writes == []
    assert result.raised == ()
    (line,) = result.messages
    assert line.startswith(f"warning: {WATCHES} is 192546, {INSTANCES} is 128, below kind's")
    assert why in line
    assert f"`sysctl -w {WATCHES}=524288 {INSTANCES}=512`" in line
    assert "host-wide" in line
    assert result.to_json()["belowRecommended"] == [
        {"sysctl": WATCHES, "value": 192546, "recommended": 524288},
        {"sysctl": INSTANCES, "value": 128, "recommended": 512},
    ]
    assert result.to_json()["raiseAllowed"] is (root and may_raise)


def test_proc_sys_limits_reads_and_writes_the_dotted_name_as_a_path(tmp_path: Path) -> None:
    folder = tmp_path / "fs" / "inotify"
    folder.mkdir(parents=True)
    (folder / "max_user_instances").write_text("128\n")
    (folder / "max_user_watches").write_text("not a number\n")
    limits = ProcSysLimits(tmp_path)
    assert limits.read(INSTANCES) == 128
    assert limits.read(WATCHES) is None
    assert limits.read("fs.inotify.no_such_limit") is None
    limits.write(INSTANCES, 512)
    assert (folder / "max_user_instances").read_text() == "512\n"
    assert inotify.RECOMMENDED == {WATCHES: 524288, INSTANCES: 512}  # kind's known-issues values
