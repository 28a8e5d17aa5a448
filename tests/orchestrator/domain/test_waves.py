from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from orchestrator.domain.selectors import LabelSelector
from orchestrator.domain.snapshot import Cluster, ControlPlaneState
from orchestrator.domain.versions import KubeVersion
from orchestrator.domain.waves import (
    DEFAULT_STRATEGY,
    CanarySpec,
    GroupSpec,
    MaintenanceWindow,
    StageSpec,
    Strategy,
    StrategyError,
    build_rollout,
    load_strategy,
    strategy_from_mapping,
)

EXAMPLE = Path(__file__).parents[3] / "examples" / "strategy.yaml"


def c(name: str, **labels: str) -> Cluster:
    return Cluster(name, ControlPlaneState(KubeVersion.parse("v1.33.1")), labels=labels)


def sel(**labels: str) -> LabelSelector:
    return LabelSelector(tuple(sorted(labels.items())))


FLEET = [
    c("prod-us-1", env="prod", region="us"),
    c("dev-b", env="dev", region="eu"),
    c("staging-eu", env="staging", region="eu", **{"calibrator.dev/canary": "true"}),
    c("prod-eu-1", env="prod", region="eu"),
    c("dev-a", env="dev", region="us"),
    c("prod-eu-2", env="prod", region="eu"),
    c("staging-us", env="staging", region="us"),
    c("lab-1", env="lab"),
]


def test_default_strategy_canary_then_one_at_a_time() -> None:
    rollout = build_rollout(FLEET, DEFAULT_STRATEGY)
    waves = rollout.waves()
    assert waves[0] == ["staging-eu"]
    assert all(len(w) == 1 for w in waves)
    assert sorted(n for w in waves for n in w) == sorted(x.name for x in FLEET)
    assert rollout.unassigned == ()


def test_stages_groups_concurrency_and_unassigned() -> None:
    strategy = Strategy(
        canary=CanarySpec(sel(**{"calibrator.dev/canary": "true"}), soak_seconds=600),
        stages=(
            StageSpec("dev", sel(env="dev"), max_concurrency=5),
            StageSpec("staging", sel(env="staging"), approval=True),
            StageSpec(
                "prod",
                sel(env="prod"),
                groups=(GroupSpec("eu", sel(region="eu")), GroupSpec("us", sel(region="us"))),
                max_concurrency=1,
                soak_seconds=3600,
                approval=True,
            ),
        ),
    )
    rollout = build_rollout(FLEET, strategy)
    assert rollout.waves() == [
        ["staging-eu"],
        ["dev-a", "dev-b"],
        ["staging-us"],
        ["prod-eu-1", "prod-us-1"],  # groups run side by side
        ["prod-eu-2"],
    ]
    assert [s.name for s in rollout.stages] == ["canary", "dev", "staging", "prod"]
    assert [s.approval for s in rollout.stages] == [False, False, True, True]
    assert rollout.stages[0].soak_seconds == 600
    assert rollout.unassigned == ("lab-1",)


def test_order_is_deterministic_whatever_the_input_order() -> None:
    a = build_rollout(FLEET).waves()
    b = build_rollout(list(reversed(FLEET))).waves()
    assert a == b


def test_no_canary_when_no_cluster_is_labelled() -> None:
    rollout = build_rollout([c("a"), c("b")])
    assert [s.name for s in rollout.stages] == ["fleet"]


SAT_0300 = datetime(2026, 12, 5, 3, 0, tzinfo=UTC)  # a Saturday


@pytest.mark.parametrize(
    ("at", "open_"),
    [
        (SAT_0300, True),
        (datetime(2026, 12, 5, 1, 59, tzinfo=UTC), False),
        (datetime(2026, 12, 5, 6, 0, tzinfo=UTC), False),
        (datetime(2026, 12, 6, 2, 0, tzinfo=UTC), True),  # Sunday
        (datetime(2026, 12, 7, 2, 30, tzinfo=UTC), False),  # Monday
        (datetime(2026, 12, 5, 4, 0, tzinfo=timezone(timedelta(hours=1))), True),  # 03:00 UTC
    ],
)
def test_window_is_open(at: datetime, open_: bool) -> None:
    window = MaintenanceWindow((5, 6), 120, 4 * 3600)
    assert window.is_open(at) is open_


def test_window_over_midnight_and_next_opening() -> None:
    window = MaintenanceWindow((4,), 22 * 60, 4 * 3600)  # Fri 22:00 for 4h
    assert window.is_open(datetime(2026, 12, 5, 1, 0, tzinfo=UTC))  # Saturday 01:00
    assert window.next_opening(datetime(2026, 12, 2, 12, 0, tzinfo=UTC)) == datetime(
        2026, 12, 4, 22, 0, tzinfo=UTC
    )
    with pytest.raises(StrategyError, match="timezone-aware"):
        window.is_open(datetime(2026, 12, 5, 1, 0))


def test_example_strategy_file() -> None:
    strategy = load_strategy(EXAMPLE.read_text())
    assert [s.name for s in strategy.stages] == ["dev", "staging", "prod"]
    assert strategy.window_for(c("p", env="prod")) is not None
    assert strategy.window_for(c("d", env="dev")) is None
    assert strategy.windows[0].describe() == "Sat,Sun 02:00 UTC for 4h"


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"stages": []}, "strategy.stages: expected a non-empty list"),
        (
            {"stages": [{"name": "a", "maxConcurrency": 0}]},
            r"stages\[0\].maxConcurrency: must be an integer from 1 to",
        ),
        ({"stages": [{"name": "a", "soak": "soon"}]}, "invalid duration 'soon'"),
        ({"stages": [{"name": "a"}, {"name": "a"}]}, "stage names must be unique"),
        (
            {
                "stages": [{"name": "a"}],
                "maintenanceWindows": [{"days": ["Funday"], "start": "02:00", "duration": "1h"}],
            },
            "unknown day 'Funday'",
        ),
        (
            {
                "stages": [{"name": "a"}],
                "maintenanceWindows": [{"start": "25:00", "duration": "1h"}],
            },
            "expected HH:MM",
        ),
        ({"stages": [{"name": "a"}], "maxFailures": -1}, "maxFailures: must be an integer from 0"),
        ({"stages": [{"name": "a"}], "speed": "fast"}, "unknown field"),
    ],
)
def test_bad_strategy(doc: dict[str, object], message: str) -> None:
    with pytest.raises(StrategyError, match=message):
        strategy_from_mapping(doc)


@pytest.mark.parametrize(
    ("value", "expected"),
    [({}, False), ({"allowPrereleases": True}, True), ({"allowPrereleases": False}, False)],
)
def test_allow_prereleases(value: dict[str, object], expected: bool) -> None:
    assert strategy_from_mapping({"stages": [{"name": "a"}], **value}).allow_prereleases is expected


@pytest.mark.parametrize("bad", ["yes", "true", 1, None])
def test_allow_prereleases_is_strictly_boolean(bad: object) -> None:
    with pytest.raises(StrategyError, match=r"strategy\.allowPrereleases: must be true or false"):
        strategy_from_mapping({"stages": [{"name": "a"}], "allowPrereleases": bad})


CANARY = sel(**{"calibrator.dev/canary": "true"})


@pytest.mark.parametrize(
    ("name", "strategy", "gates"),
    [
        ("no gates", Strategy(CanarySpec(CANARY), (StageSpec("dev", sel(env="dev")),)), []),
        (
            "approvalAfter gates the first stage after the canary",
            Strategy(
                CanarySpec(CANARY, approval_after=True),
                (StageSpec("dev", sel(env="dev")), StageSpec("prod", sel(env="prod"))),
            ),
            ["dev"],
        ),
        (
            "a stage that selects nobody is not the one gated",
            Strategy(
                CanarySpec(CANARY, approval_after=True),
                (StageSpec("qa", sel(env="qa")), StageSpec("prod", sel(env="prod"))),
            ),
            ["prod"],
        ),
        (
            "own approval and approvalAfter on the same stage: one gate",
            Strategy(
                CanarySpec(CANARY, approval_after=True),
                (StageSpec("dev", sel(env="dev"), approval=True),),
            ),
            ["dev"],
        ),
        (
            "no canary cluster: nothing to approve after",
            Strategy(
                CanarySpec(sel(team="none"), approval_after=True),
                (StageSpec("dev", sel(env="dev")), StageSpec("prod", sel(env="prod"))),
            ),
            [],
        ),
        (
            "stage approvals are kept",
            Strategy(
                None,
                (
                    StageSpec("dev", sel(env="dev")),
                    StageSpec("prod", sel(env="prod"), approval=True),
                ),
            ),
            ["prod"],
        ),
    ],
)
def test_build_rollout_decides_every_approval_gate(
    name: str, strategy: Strategy, gates: list[str]
) -> None:
    rollout = build_rollout(FLEET, strategy)
    assert [s.name for s in rollout.stages if s.approval] == gates, name
    assert not any(s.approval for s in rollout.stages if s.name == "canary")


@pytest.mark.parametrize("key", ["observedUsage", "unsatisfiableDisruptionBudgets"])
@pytest.mark.parametrize(
    ("value", "expected"), [(None, "block"), ("block", "block"), ("warn", "warn")]
)
def test_observed_finding_actions(key: str, value: str | None, expected: str) -> None:
    doc: dict[str, object] = {"stages": [{"name": "a"}]}
    if value is not None:
        doc[key] = value
    strategy = strategy_from_mapping(doc)
    field = "observed_usage" if key == "observedUsage" else "unsatisfiable_disruption_budgets"
    assert getattr(strategy, field) == expected


@pytest.mark.parametrize("key", ["observedUsage", "unsatisfiableDisruptionBudgets"])
@pytest.mark.parametrize("bad", ["Block", "ignore", "", True, None, ["warn"]])
def test_observed_finding_actions_are_block_or_warn(key: str, bad: object) -> None:
    with pytest.raises(StrategyError, match=rf"^strategy\.{key}: must be block or warn, got "):
        strategy_from_mapping({"stages": [{"name": "a"}], key: bad})
