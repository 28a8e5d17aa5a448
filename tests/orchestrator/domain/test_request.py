"""The one calibration request parser: what every way in (CLI, client, workflow, plan) reads."""

from __future__ import annotations

from typing import Any

import pytest

from orchestrator.domain.errors import InputError
from orchestrator.domain.request import (
    CalibrationRequest,
    parse_calibration_request,
    version_field,
)
from orchestrator.domain.versions import KubeVersion
from orchestrator.domain.waves import DEFAULT_STRATEGY


def test_a_good_request_parses_into_domain_values() -> None:
    request = parse_calibration_request(
        "v1.33.5", {"stages": [{"name": "fleet"}]}, "env=prod,region in (eu,us)"
    )
    assert request.target == KubeVersion.parse("v1.33.5")
    assert [s.name for s in request.strategy.stages] == ["fleet"]
    assert request.selector is not None and request.selector.matches(
        {"env": "prod", "region": "eu"}
    )
    assert not request.selector.matches({"env": "dev", "region": "eu"})


def test_defaults_are_the_default_strategy_and_the_whole_fleet() -> None:
    assert parse_calibration_request("1.33.5") == CalibrationRequest(
        KubeVersion.parse("v1.33.5"), DEFAULT_STRATEGY, None
    )


# (target, strategy, selector, the whole message): one text per mistake, wherever it is found.
BAD: list[tuple[object, Any, object, str]] = [
    (
        "latest",
        None,
        None,
        "target: invalid Kubernetes version 'latest': expected a string like v1.31.1",
    ),
    (5, None, None, "target: expected a Kubernetes version like v1.31.1, got 5"),
    (
        "v1.33.5\n",
        None,
        None,
        "target: invalid Kubernetes version 'v1.33.5\\n': leading or trailing whitespace",
    ),
    ("v1.33.5", None, "", "selector: expected a non-empty string, got ''"),
    ("v1.33.5", None, 7, "selector: expected a non-empty string, got 7"),
]


@pytest.mark.parametrize(("target", "strategy", "selector", "message"), BAD)
def test_each_mistake_has_one_text(
    target: object, strategy: Any, selector: object, message: str
) -> None:
    with pytest.raises(InputError) as err:
        parse_calibration_request(target, strategy, selector)
    assert str(err.value) == message


@pytest.mark.parametrize(
    ("strategy", "selector", "fragment"),
    [
        ({"stages": [{"name": "a", "approvel": True}]}, None, "unknown field(s) approvel"),
        ({"apiVersion": "v9", "stages": [{"name": "a"}]}, None, "strategy.apiVersion"),
        (None, "env in prod", "invalid label selector"),
        (None, "a=" + "b" * 2000, "selector: expected a non-empty string"),
    ],
)
def test_strategy_and_selector_mistakes(strategy: Any, selector: object, fragment: str) -> None:
    with pytest.raises(InputError) as err:
        parse_calibration_request("v1.33.5", strategy, selector)
    assert fragment in str(err.value) and "\n" not in str(err.value)


def test_a_long_version_is_refused_before_parsing_and_named_by_its_field() -> None:
    with pytest.raises(InputError) as err:
        version_field("v" + "1" * 5000, "plan.steps[0].version")
    assert str(err.value).startswith("plan.steps[0].version: expected a Kubernetes version")
