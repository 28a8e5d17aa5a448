from __future__ import annotations

import pytest

from orchestrator.domain.errors import InputError
from orchestrator.domain.selectors import parse_selector_string, selector_from_mapping


@pytest.mark.parametrize(
    ("text", "labels", "ok"),
    [
        ("env=prod", {"env": "prod"}, True),
        ("env==prod,region=eu", {"env": "prod", "region": "us"}, False),
        ("env!=prod", {}, True),
        ("region in (eu,us)", {"region": "us"}, True),
        ("region notin (eu, us)", {"region": "ap"}, True),
        ("canary", {"canary": ""}, True),
        ("!legacy", {"legacy": "x"}, False),
        ("", {"x": "y"}, True),
    ],
)
def test_selector_strings(text: str, labels: dict[str, str], ok: bool) -> None:
    assert parse_selector_string(text).matches(labels) is ok


@pytest.mark.parametrize("bad", ["region in eu", "=x", "a in ()", "!a=b"])
def test_bad_selector_strings(bad: str) -> None:
    with pytest.raises(InputError, match="invalid label selector"):
        parse_selector_string(bad)


def test_mapping_form() -> None:
    sel = selector_from_mapping(
        {
            "matchLabels": {"env": "prod"},
            "matchExpressions": [{"key": "region", "operator": "In", "values": ["eu"]}],
        },
        "x",
    )
    assert sel.matches({"env": "prod", "region": "eu"})
    assert sel.describe() == "env=prod,region in (eu)"
    with pytest.raises(InputError, match="operator must be one of"):
        selector_from_mapping({"matchExpressions": [{"key": "a", "operator": "Like"}]}, "x")
    with pytest.raises(InputError, match="takes no values"):
        selector_from_mapping(
            {"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["b"]}]}, "x"
        )
