"""``-o json`` text: ``write_json`` streams exactly what ``dumps_json`` returns, iterators included."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from orchestrator.cli import output
from orchestrator.cli.main import app
from orchestrator.cli.output import dumps_json, write_json
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


@pytest.mark.parametrize("doc", DOCS)
def test_an_iterator_is_written_as_its_list(doc: dict[str, object]) -> None:
    lazy = {k: iter(v) if isinstance(v, list) else v for k, v in doc.items()}
    out = io.StringIO()
    write_json(lazy, out)
    assert out.getvalue() == dumps_json(doc)


def test_items_are_encoded_as_they_come(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(output, "_BATCH", 2)
    made: list[int] = []

    def items() -> Iterator[dict[str, int]]:
        for i in range(7):
            made.append(i)
            yield {"i": i}

    out = io.StringIO()
    writes: list[int] = []

    class Spy(io.StringIO):
        def write(self, s: str) -> int:
            writes.append(len(made))
            return out.write(s)

    write_json({"decisions": items()}, Spy())
    assert out.getvalue() == dumps_json({"decisions": [{"i": i} for i in range(7)]})
    # Written batch by batch while the generator runs, not once at the end.
    assert writes[:4] == [0, 1, 3, 5]


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
