import json
from pathlib import Path

import pytest

from orchestrator.localplane import ociwrapper as w

FULL_MASK = (1 << len(w.CAPABILITIES)) - 1
NO_SYS_RESOURCE = FULL_MASK & ~(1 << w.CAPABILITIES.index("CAP_SYS_RESOURCE"))


@pytest.mark.parametrize(
    ("mask", "missing"),
    [
        (FULL_MASK, frozenset()),
        (NO_SYS_RESOURCE, frozenset({"CAP_SYS_RESOURCE"})),
        (0x000001FFFEFFFFFF, frozenset({"CAP_SYS_RESOURCE"})),  # this VM's CapBnd
        (FULL_MASK & ~1, frozenset({"CAP_CHOWN"})),
    ],
)
def test_missing_capabilities(mask: int, missing: frozenset[str]) -> None:
    assert w.missing_capabilities(mask) == missing


def test_own_bounding_mask_reads_capbnd() -> None:
    status = "Name:\tx\nCapPrm:\t0000000000000000\nCapBnd:\t000001fffeffffff\n"
    assert w.own_bounding_mask(status) == 0x000001FFFEFFFFFF
    with pytest.raises(ValueError, match="CapBnd"):
        w.own_bounding_mask("Name:\tx\n")


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--root", "/r", "--log", "/l", "create", "--bundle", "/b", "id"], "/b/config.json"),
        (["--debug", "create", "--bundle=/b", "id"], "/b/config.json"),
        (["run", "-b", "/b", "id"], "/b/config.json"),
        (["--systemd-cgroup", "create", "id"], "config.json"),
        (["--root", "/r", "exec", "--process", "/p.json", "--detach", "id"], "/p.json"),
        (["exec", "-p", "/p.json", "id"], "/p.json"),
        (["exec", "id", "ls"], None),
        (["--root", "/r", "start", "id"], None),
        (["delete", "--force", "id"], None),
        (["--version"], None),
        ([], None),
    ],
)
def test_target_file(args: list[str], expected: str | None) -> None:
    got = w.target_file(args)
    assert (str(got) if got else None) == expected


def _caps(*extra: str) -> dict[str, list[str]]:
    return {k: ["CAP_CHOWN", *extra] for k in w.CAP_SETS}


@pytest.mark.parametrize(
    ("doc", "wanted"),
    [
        ({"ociVersion": "1.0.2", "process": {"capabilities": _caps("CAP_SYS_RESOURCE")}}, True),
        ({"capabilities": _caps("CAP_SYS_RESOURCE"), "args": ["sh"]}, True),  # exec process.json
        ({"ociVersion": "1.0.2", "process": {"capabilities": _caps()}}, False),
        ({"ociVersion": "1.0.2", "process": {"args": ["sh"]}}, False),
    ],
)
def test_rewrite_strips_only_missing(tmp_path: Path, doc: dict[str, object], wanted: bool) -> None:
    path = tmp_path / "config.json"
    original = json.dumps(doc)
    path.write_text(original)
    w.rewrite(path, frozenset({"CAP_SYS_RESOURCE"}))
    after = json.loads(path.read_text())
    process = after.get("process", after)
    caps = process.get("capabilities")
    if caps is not None:
        for key in w.CAP_SETS:
            assert caps[key] == ["CAP_CHOWN"]
    assert (path.read_text() != original) is wanted
    assert list(tmp_path.iterdir()) == [path]


def test_strip_keeps_unknown_and_absent_sets() -> None:
    caps: dict[str, object] = {"bounding": ["CAP_SYS_RESOURCE", "CAP_FUTURE"], "ambient": None}
    assert w.strip_capabilities(caps, frozenset({"CAP_SYS_RESOURCE"}))
    assert caps == {"bounding": ["CAP_FUTURE"], "ambient": None}


def test_main_rejects_bad_usage() -> None:
    with pytest.raises(SystemExit) as exc:
        w.main(["create", "id"])
    assert exc.value.code == 2
