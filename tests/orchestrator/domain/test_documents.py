"""The document loader: same data as yaml.safe_load for good input, one clear error for bad."""

from __future__ import annotations

import json

import pytest
import yaml

from orchestrator.domain.documents import (
    MAX_ALIAS_NODES,
    MAX_DEPTH,
    DocumentError,
    load_document,
    quote,
)


def _bomb(levels: int = 9) -> str:
    text = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    for i in range(1, levels + 1):
        prev, cur = chr(ord("a") + i - 1), chr(ord("a") + i)
        text += f"{cur}: &{cur} [" + ",".join(["*" + prev] * 9) + "]\n"
    return text


SAME_AS_SAFE_LOAD = [
    "a: 1\nb: [x, 'y', 2026-01-01, yes, ~, 1.5, 0x1f, -3]\n",
    "{a: 1, b: {c: [1, 2]}}",
    '{"a": 1, "b": [1, 2.5, null, true, "x"]}',
    "- &x {k: v}\n- *x\n",
    "key: |\n  text ] with [ brackets\n",
    "# nothing but a comment\n",
    "",
    "plain scalar",
]


@pytest.mark.parametrize("text", SAME_AS_SAFE_LOAD)
def test_loads_what_safe_load_loads(text: str) -> None:
    assert load_document(text) == yaml.safe_load(text)


def test_bytes_and_bom() -> None:
    assert load_document("\ufeffa: 1".encode()) == {"a": 1}


def test_merge_keys_explicit_wins() -> None:
    doc = load_document("base: &b {x: 1, y: 2}\nc:\n  <<: *b\n  y: 3\nl: [<<]\n")
    assert doc["c"] == {"x": 1, "y": 3}
    assert doc["l"] == ["<<"]


BAD = [
    ("a: 1\na: 2\n", "duplicate key 'a'"),
    ('{"a": 1, "a": 2}', "duplicate key 'a'"),
    ("a: " + "9" * 5000, "integer of 5000 digits"),
    ('{"a": ' + "9" * 5000 + "}", "integer of 5000 digits"),
    ('{"a": NaN}', "NaN is not a number"),
    ('{"a": 1e999}', "out of range"),
    ("a: !!python/object:os.system x", "unsupported tag"),
    ("a: !!set {x}", "unsupported tag"),
    ("---\na: 1\n---\nb: 2\n", "expected one YAML document"),
    ("a: &x [*x]", "recursive alias"),
    ("a: *nope", "unknown alias"),
    ("[" * 20000 + "]" * 20000, "nests too deep"),
    ("- " * 20000 + "x", f"nests deeper than {MAX_DEPTH} levels"),
    ("a: 2026-13-45", "invalid timestamp"),
    ("a: [\n", "not valid YAML at line 2"),
    ("? [a]\n: b\n", "a mapping key must be a scalar"),
    (_bomb(), f"more than {MAX_ALIAS_NODES:,} nodes"),
    (b"a: \xff\xfe", "not UTF-8"),
    ("a: b\x00", "NUL characters"),
    ("a: \x07b", "control characters are not allowed"),
    ("a: \ud800", "not valid text"),
    ("a: !!float nope", "invalid float 'nope'"),
    ("a: {b: 1, b: 2}", "duplicate key 'b'"),
]


@pytest.mark.parametrize(("text", "message"), BAD)
def test_bad_documents(text: str | bytes, message: str) -> None:
    with pytest.raises(DocumentError, match=r"^snapshot") as err:
        load_document(text, "snapshot")
    assert message in str(err.value)
    assert len(str(err.value)) < 300


def test_size_limit_counts_bytes() -> None:
    with pytest.raises(DocumentError, match="larger than the 0 MiB limit"):
        load_document(b"a: 1234", max_bytes=4)
    with pytest.raises(DocumentError, match="limit"):
        load_document("é" * 40, max_bytes=50)
    assert load_document("é" * 10, max_bytes=50) == "é" * 10


def test_alias_bomb_below_the_limit_shares_objects() -> None:
    doc = load_document(_bomb(4))
    assert doc["e"][0] is doc["e"][1]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("short", "'short'"),
        ("x" * 1000, "'" + "x" * 60 + "…' (1000 characters)"),
        (10**200, "an integer of about 201 digits"),
        ({"a": 1}, "a mapping of 1 entries"),
        ([1, 2], "a list of 2 items"),
        (True, "True"),
        (1.5, "1.5"),
    ],
)
def test_quote(value: object, expected: str) -> None:
    assert quote(value) == expected


def test_json_fast_path_falls_back_to_yaml_flow() -> None:
    assert load_document("{a: [b, c]}") == {"a": ["b", "c"]}
    assert load_document(json.dumps({"a": [1]})) == {"a": [1]}
