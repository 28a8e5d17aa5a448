"""``cli.overlap``: chunks rendered in forked children give exactly the parent's text.

The children are forced here (``available`` and ``idle_cpus`` decide in a real run, by CPUs and by
the machine's idle time), so these tests fork whatever the machine's load: each asserts text,
never timing.
"""

from __future__ import annotations

import io
import json
import os
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from typer.testing import CliRunner

from orchestrator.cli import output, overlap
from orchestrator.cli.main import app
from orchestrator.cli.output import Items, dumps_json, write_json
from testkit.fleetgen import generate_fleet_mapping

PARENT = os.getpid()


def _render(items: Sequence[int], start: int) -> str:
    return "".join(f"{start + k}:{item};" for k, item in enumerate(items))


def _source(n: int, made: list[int]) -> Iterator[int]:
    for i in range(n):
        made.append(i)
        yield i * i


def _forks(monkeypatch: pytest.MonkeyPatch, min_chunk: int) -> list[int]:
    """Force children from ``min_chunk`` items on, an idle machine; gets each chunk's length."""
    monkeypatch.setattr(overlap, "MIN_CHUNK", min_chunk)
    monkeypatch.setattr(overlap, "idle_cpus", lambda since: 2.0)
    spawned: list[int] = []
    spawn = overlap._Child.spawn

    def counted(render: overlap.Render[int], items: list[int], start: int, batch: int) -> object:
        spawned.append(len(items))
        return spawn(render, items, start, batch)

    monkeypatch.setattr(overlap._Child, "spawn", counted)
    return spawned


@pytest.mark.parametrize("n", [0, 1, 5, 17, 64, 301])
def test_forked_chunks_are_the_text_rendered_here(monkeypatch: pytest.MonkeyPatch, n: int) -> None:
    spawned = _forks(monkeypatch, 4)
    expected = _render([i * i for i in range(n)], 0)
    made: list[int] = []
    text = "".join(overlap.rendered(_source(n, made), _render, overlap=True, batch=3, expected=n))
    assert text == expected
    assert made == list(range(n))
    if n >= 2 * 4:
        assert spawned, "a stream this long is handed to children"
        # Its length known, the end is never handed over whole: the parent renders a share
        # instead of waiting idle for the last child.
        assert sum(spawned) < n


def _accented(items: Sequence[int], start: int) -> str:
    return "".join(f"{start + k}:é€{item};" for k, item in enumerate(items))


def test_a_childs_text_is_read_back_in_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    """Read 5 bytes at a time: characters split across reads come back whole."""
    spawned = _forks(monkeypatch, 4)
    monkeypatch.setattr(overlap, "READ_BYTES", 5)
    text = "".join(overlap.rendered(iter(range(30)), _accented, overlap=True, batch=3))
    assert text == _accented(list(range(30)), 0)
    assert spawned


def test_without_overlap_the_parent_renders_every_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    spawned = _forks(monkeypatch, 1)
    chunks = list(overlap.rendered(iter(range(10)), _render, overlap=False, batch=4))
    assert chunks == [_render([0, 1, 2, 3], 0), _render([4, 5, 6, 7], 4), _render([8, 9], 8)]
    assert spawned == []


def test_a_busy_machine_gets_no_child(monkeypatch: pytest.MonkeyPatch) -> None:
    """Less than ``IDLE_CPUS`` idle while the first chunk was made: the parent renders it all."""
    spawned = _forks(monkeypatch, 4)
    asked: list[object] = []

    def busy(since: object) -> float:
        asked.append(since)
        return 0.4

    monkeypatch.setattr(overlap, "idle_cpus", busy)
    text = "".join(overlap.rendered(iter(range(40)), _render, overlap=True, batch=8, expected=40))
    assert text == _render(list(range(40)), 0)
    assert spawned == []
    assert len(asked) == 1, "asked once per stream"


def test_idle_cpus_reads_this_machine() -> None:
    """``/proc/stat`` read twice: a share of the machine's CPUs, never more than all of them."""
    began = overlap.cpu_ticks()
    assert began is not None and 0 < began[0] <= began[1]
    sum(i * i for i in range(200_000))  # some ticks pass
    assert 0.0 <= overlap.idle_cpus(began) <= (os.cpu_count() or 1)
    assert overlap.idle_cpus(None) == 0.0


def _fails_in_child(items: Sequence[int], start: int) -> str:
    if os.getpid() != PARENT:
        raise RuntimeError("a child that breaks")
    return _render(items, start)


def test_a_child_that_fails_is_rendered_again_here(monkeypatch: pytest.MonkeyPatch) -> None:
    spawned = _forks(monkeypatch, 4)
    text = "".join(overlap.rendered(iter(range(40)), _fails_in_child, overlap=True, batch=8))
    assert text == _render(list(range(40)), 0)
    assert spawned


def _hangs_in_child(items: Sequence[int], start: int) -> str:
    if os.getpid() != PARENT:
        time.sleep(3600)
    return _render(items, start)


def test_a_child_past_its_bound_is_killed_and_rendered_here(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    spawned = _forks(monkeypatch, 4)
    monkeypatch.setattr(overlap, "SECONDS_BASE", 0.05)
    monkeypatch.setattr(overlap, "SECONDS_PER_ITEM", 0.0)
    text = "".join(overlap.rendered(iter(range(12)), _hangs_in_child, overlap=True, batch=8))
    assert text == _render(list(range(12)), 0)
    assert spawned


@pytest.mark.parametrize("fork", [False, True])
def test_items_are_written_as_their_list(monkeypatch: pytest.MonkeyPatch, fork: bool) -> None:
    _forks(monkeypatch, 3)
    monkeypatch.setattr(overlap, "available", lambda: fork)
    monkeypatch.setattr(output, "_BATCH", 2)
    rows = [{"i": i, "t": "é\n"} for i in range(23)]
    for n in (0, 1, 23):
        doc = {"decisions": rows[:n], "tail": [{"x": None}], "n": 3}
        lazy = {**doc, "decisions": Items(iter(range(n)), rows.__getitem__, overlap=True)}
        out = io.StringIO()
        write_json(lazy, out)
        assert out.getvalue() == dumps_json(doc)
        assert json.loads(out.getvalue()) == doc


@pytest.mark.parametrize("args", [[], ["--explain"]])
def test_place_json_is_the_same_text_with_children(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, args: list[str]
) -> None:
    """Decisions summarised in children, mid-placement, read the ledger as the parent's do.

    A fleet with tainted, full and latency-bound clusters, current placements and fallbacks
    (``fleetgen``), chunks of 16 decisions: each child explains its chunk while the parent has
    placed only part of the fleet, and the explainer's ledger caches must not leak across.
    """
    snapshot = tmp_path / "fleet.json"
    snapshot.write_text(json.dumps(generate_fleet_mapping(30, 160, seed=7)), encoding="utf-8")
    runner = CliRunner()
    command = ["place", "-s", str(snapshot), *args, "-o", "json"]
    monkeypatch.setattr(overlap, "available", lambda: False)
    alone = runner.invoke(app, command)
    spawned = _forks(monkeypatch, 16)
    monkeypatch.setattr(overlap, "CHUNKS", 10)
    monkeypatch.setattr(overlap, "available", lambda: True)
    forked = runner.invoke(app, command)
    # --explain's text grows with workloads x clusters: never held for a child.
    assert bool(spawned) is not bool(args)
    assert forked.exit_code == alone.exit_code
    assert forked.stdout == alone.stdout
    assert len(json.loads(forked.stdout)["decisions"]) == 160
