"""``-o json`` text: ``write_json`` streams exactly what ``dumps_json`` returns, ``Items`` included."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from orchestrator.cli import output
from orchestrator.cli.main import app
from orchestrator.cli.output import Items, dumps_json, write_json
from orchestrator.domain.snapshot_load import load_snapshot
from orchestrator.placement import decision_to_json, place, placement_to_json

FLEET = Path(__file__).parents[3] / "examples" / "fleet.yaml"

DOCS: list[dict[str, object]] = [
    {},
    {"decisions": [], "unreachable": []},
    {"decisions": [{"a": 1}], "n": 3, "s": "x", "m": {"k": [1, 2]}},
    {"items": [{"i": i, "t": "é\n"} for i in range(1100)], "tail": [{"x": None}]},
    {"first": [1, [2, 3], {"b": True}], "empty": {}},
]


@pytest.mark.parametrize("doc", DOCS)
def test_write_json_writes_dumps_json(doc: dict[str, object]) -> None:
    out = io.StringIO()
    write_json(doc, out)
    assert out.getvalue() == dumps_json(doc)
    assert json.loads(out.getvalue()) == doc


def test_items_are_encoded_a_batch_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each batch's text is written before the next batch's items are turned into JSON."""
    monkeypatch.setattr(output, "_BATCH", 2)
    converted: list[int] = []

    def to_json(i: int) -> dict[str, int]:
        converted.append(i)
        return {"i": i}

    out = io.StringIO()
    writes: list[int] = []

    class Spy(io.StringIO):
        def write(self, s: str) -> int:
            writes.append(len(converted))
            return out.write(s)

    write_json({"decisions": Items(range(7), to_json)}, Spy())
    assert out.getvalue() == dumps_json({"decisions": [{"i": i} for i in range(7)]})
    assert writes[:5] == [0, 0, 2, 4, 6]


def test_decision_to_json_is_placement_to_json_item() -> None:
    result = place(load_snapshot(FLEET.read_bytes()))
    for explain in (False, True):
        doc = placement_to_json(result, explain=explain)
        assert doc["decisions"] == [decision_to_json(d, explain=explain) for d in result.decisions]


@pytest.mark.parametrize("args", [[], ["--explain"], ["--workload", "edge/edge-cache"]])
def test_place_json_streamed_is_the_whole_document(args: list[str]) -> None:
    """The streamed ``place -o json`` is the text of the document ``-o yaml`` prints."""
    runner = CliRunner()
    streamed = runner.invoke(app, ["place", "-s", str(FLEET), *args, "-o", "json"])
    as_yaml = runner.invoke(app, ["place", "-s", str(FLEET), *args, "-o", "yaml"])
    assert streamed.exit_code == as_yaml.exit_code
    doc = yaml.safe_load(as_yaml.stdout)
    assert streamed.stdout == dumps_json(doc)
