"""Chained and efficient upgrade plans, table-driven like cluster-api's own tests."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.domain.errors import InputError
from orchestrator.domain.skew import max_kubelet_lag
from orchestrator.domain.snapshot import Cluster, ControlPlaneState, MachineDeploymentState
from orchestrator.domain.upgradeplan import (
    DowngradeError,
    check_target,
    plan_cluster,
    validate_plan,
)
from orchestrator.domain.versions import KubeVersion

V = KubeVersion.parse
STD = ["v1.30.0", "v1.31.1", "v1.32.0", "v1.33.1", "v1.34.1", "v1.35.2"]


def cluster(cp: str, *workers: str) -> Cluster:
    return Cluster(
        name="c",
        control_plane=ControlPlaneState(V(cp), 1),
        machine_deployments=tuple(
            MachineDeploymentState(f"md-{i}", V(w), 1) for i, w in enumerate(workers)
        ),
    )


@dataclass
class Case:
    name: str
    cp: str
    workers: list[str]
    target: str
    available: list[str] = field(default_factory=lambda: list(STD))
    cp_steps: list[str] = field(default_factory=list)
    worker_steps: list[str] = field(default_factory=list)
    order: list[str] | None = None
    blocked: str | None = None
    allow_prereleases: bool = False


CASES = [
    Case(
        "reference example: four minors, workers step once mid-way",
        "v1.30.0",
        ["v1.30.0"],
        "v1.34.1",
        ["v1.31.1", "v1.32.0", "v1.33.1", "v1.34.1"],
        ["v1.31.1", "v1.32.0", "v1.33.1", "v1.34.1"],
        ["v1.33.1", "v1.34.1"],
        [
            "controlPlane -> v1.31.1",
            "controlPlane -> v1.32.0",
            "controlPlane -> v1.33.1",
            "workers md-0 -> v1.33.1",
            "controlPlane -> v1.34.1",
            "workers md-0 -> v1.34.1",
        ],
    ),
    Case(
        "one minor",
        "v1.33.1",
        ["v1.33.1"],
        "v1.34.1",
        cp_steps=["v1.34.1"],
        worker_steps=["v1.34.1"],
    ),
    Case(
        "two minors: workers skip the intermediate minor",
        "v1.32.0",
        ["v1.32.0"],
        "v1.34.1",
        cp_steps=["v1.33.1", "v1.34.1"],
        worker_steps=["v1.34.1"],
    ),
    Case(
        "three minors: still one worker step",
        "v1.31.1",
        ["v1.31.1"],
        "v1.34.1",
        cp_steps=["v1.32.0", "v1.33.1", "v1.34.1"],
        worker_steps=["v1.34.1"],
    ),
    Case(
        "five minors: one intermediate worker step",
        "v1.30.0",
        ["v1.30.0"],
        "v1.35.2",
        cp_steps=["v1.31.1", "v1.32.0", "v1.33.1", "v1.34.1", "v1.35.2"],
        worker_steps=["v1.33.1", "v1.35.2"],
    ),
    Case(
        "patch-only upgrade",
        "v1.34.0",
        ["v1.34.0"],
        "v1.34.1",
        cp_steps=["v1.34.1"],
        worker_steps=["v1.34.1"],
    ),
    Case("already at target", "v1.34.1", ["v1.34.1"], "v1.34.1", order=[]),
    Case(
        "control plane at target, workers behind",
        "v1.34.1",
        ["v1.32.0"],
        "v1.34.1",
        worker_steps=["v1.34.1"],
        order=["workers md-0 -> v1.34.1"],
    ),
    Case(
        "workers already 3 behind step before the control plane moves",
        "v1.33.1",
        ["v1.30.0"],
        "v1.35.2",
        cp_steps=["v1.34.1", "v1.35.2"],
        worker_steps=["v1.33.1", "v1.35.2"],
        order=[
            "workers md-0 -> v1.33.1",
            "controlPlane -> v1.34.1",
            "controlPlane -> v1.35.2",
            "workers md-0 -> v1.35.2",
        ],
    ),
    Case("no MachineDeployments", "v1.32.0", [], "v1.33.1", cp_steps=["v1.33.1"]),
    Case(
        "pools at different versions: only the lagging pool takes the intermediate step",
        "v1.33.1",
        ["v1.33.1", "v1.30.0"],
        "v1.34.1",
        cp_steps=["v1.34.1"],
        worker_steps=["v1.33.1", "v1.34.1"],
        order=[
            "workers md-1 -> v1.33.1",
            "controlPlane -> v1.34.1",
            "workers md-0,md-1 -> v1.34.1",
        ],
    ),
    Case(
        "newest patch of each intermediate minor",
        "v1.31.0",
        ["v1.31.0"],
        "v1.33.0",
        ["v1.31.0", "v1.32.0", "v1.32.3", "v1.32.1", "v1.33.0", "v1.33.2"],
        ["v1.32.3", "v1.33.0"],
        ["v1.33.0"],
    ),
    Case(
        "current version missing from the list",
        "v1.30.5",
        ["v1.30.5"],
        "v1.32.0",
        cp_steps=["v1.31.1", "v1.32.0"],
        worker_steps=["v1.32.0"],
    ),
    Case(
        "pre-release versions order before GA (strategy opts in)",
        "v1.31.1",
        ["v1.31.1"],
        "v1.33.0-beta.0",
        ["v1.31.1", "v1.32.0-alpha.2", "v1.32.0-rc.1", "v1.33.0-beta.0"],
        ["v1.32.0-rc.1", "v1.33.0-beta.0"],
        ["v1.33.0-beta.0"],
        allow_prereleases=True,
    ),
    Case(
        "pre-release to a later pre-release of the same minor",
        "v1.32.0-alpha.2",
        ["v1.32.0-alpha.2"],
        "v1.32.0-rc.1",
        ["v1.32.0-alpha.2", "v1.32.0-rc.1"],
        ["v1.32.0-rc.1"],
        ["v1.32.0-rc.1"],
    ),
    Case(
        "pre-release to GA",
        "v1.32.0-rc.1",
        ["v1.32.0-rc.1"],
        "v1.32.0",
        ["v1.32.0-rc.1", "v1.32.0"],
        ["v1.32.0"],
        ["v1.32.0"],
    ),
    Case(
        "build metadata keeps list order: last twin wins",
        "v1.31.1+foo.1",
        ["v1.31.1+foo.1"],
        "v1.33.0+foo.1",
        ["v1.31.1+foo.1", "v1.32.0+foo.1", "v1.32.0+foo.2-bar.2", "v1.33.0+foo.1"],
        ["v1.32.0+foo.2-bar.2", "v1.33.0+foo.1"],
        ["v1.33.0+foo.1"],
    ),
    Case(
        "build metadata only upgrade",
        "v1.32.0+foo.1",
        ["v1.32.0+foo.1"],
        "v1.32.0+foo.2",
        ["v1.32.0+foo.1", "v1.32.0+foo.2"],
        ["v1.32.0+foo.2"],
        ["v1.32.0+foo.2"],
    ),
    Case(
        "a missing intermediate minor blocks the cluster",
        "v1.30.0",
        ["v1.30.0"],
        "v1.32.0",
        ["v1.30.0", "v1.32.0"],
        blocked="no available version for minor 1.31",
    ),
    Case(
        "no version list: one minor is fine",
        "v1.30.0",
        ["v1.30.0"],
        "v1.31.1",
        [],
        ["v1.31.1"],
        ["v1.31.1"],
    ),
    Case(
        "no version list: two minors block",
        "v1.30.0",
        ["v1.30.0"],
        "v1.32.0",
        [],
        blocked="no available version for minor 1.31",
    ),
    Case(
        "workers newer than the control plane block",
        "v1.32.0",
        ["v1.33.1"],
        "v1.34.1",
        blocked="newer than the control plane",
    ),
    Case(
        "workers 4 minors behind block",
        "v1.34.1",
        ["v1.30.0"],
        "v1.35.2",
        blocked="4 minors behind",
    ),
    Case(
        "kubelets older than 1.25 may trail by only 2",
        "v1.24.3",
        ["v1.24.3"],
        "v1.28.1",
        ["v1.24.3", "v1.25.2", "v1.26.1", "v1.27.4", "v1.28.1"],
        ["v1.25.2", "v1.26.1", "v1.27.4", "v1.28.1"],
        ["v1.26.1", "v1.28.1"],
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_plan_cluster(case: Case) -> None:
    plan = plan_cluster(
        cluster(case.cp, *case.workers),
        V(case.target),
        [V(v) for v in case.available],
        allow_prereleases=case.allow_prereleases,
    )
    if case.blocked:
        assert plan.blocked
        assert any(case.blocked in r for r in plan.reasons), plan.reasons
        return
    assert not plan.blocked, plan.reasons
    assert [str(v) for v in plan.control_plane_steps] == case.cp_steps
    assert [str(v) for v in plan.worker_steps] == case.worker_steps
    if case.order is not None:
        assert [s.describe() for s in plan.steps] == case.order


# ------------------------------------------------------------------------------------------
# Pre-releases are not releases: an intermediate step or "newest" only when the strategy opts in
# (allowPrereleases), the target whenever it is one. Same table shape as above.
# ------------------------------------------------------------------------------------------

PRE = ["v1.33.5", "v1.34.2", "v1.34.3-rc.0", "v1.35.0"]

PRERELEASE_CASES = [
    Case(
        "GA target routes via the newest GA patch, not a newer rc",
        "v1.33.5",
        ["v1.33.5"],
        "v1.35.0",
        PRE,
        ["v1.34.2", "v1.35.0"],
        ["v1.35.0"],
    ),
    Case(
        "opted in: the newest patch of the minor, rc included",
        "v1.33.5",
        ["v1.33.5"],
        "v1.35.0",
        PRE,
        ["v1.34.3-rc.0", "v1.35.0"],
        ["v1.35.0"],
        allow_prereleases=True,
    ),
    Case(
        "a minor with only a pre-release blocks",
        "v1.33.5",
        ["v1.33.5"],
        "v1.35.0",
        ["v1.33.5", "v1.34.0-rc.1", "v1.35.0"],
        blocked="no release for minor 1.34 between v1.33.5 and v1.35.0, only pre-release(s) "
        "v1.34.0-rc.1",
    ),
    Case(
        "the block names the opt-in",
        "v1.33.5",
        ["v1.33.5"],
        "v1.35.0",
        ["v1.33.5", "v1.34.0-alpha.1", "v1.34.0-rc.1", "v1.35.0"],
        blocked="a pre-release is an intermediate step only with allowPrereleases: true",
    ),
    Case(
        "opted in: a minor with only a pre-release is crossed through it",
        "v1.33.5",
        ["v1.33.5"],
        "v1.35.0",
        ["v1.33.5", "v1.34.0-alpha.1", "v1.34.0-rc.1", "v1.35.0"],
        ["v1.34.0-rc.1", "v1.35.0"],
        ["v1.35.0"],
        allow_prereleases=True,
    ),
    Case(
        "a pre-release target is used without opting in",
        "v1.34.2",
        ["v1.34.2"],
        "v1.35.0-rc.1",
        ["v1.34.2", "v1.35.0-rc.1", "v1.35.0"],
        ["v1.35.0-rc.1"],
        ["v1.35.0-rc.1"],
    ),
    Case(
        "a pre-release target two minors up: GA intermediate, rc last",
        "v1.33.5",
        ["v1.33.5"],
        "v1.35.0-rc.1",
        ["v1.33.5", "v1.34.2", "v1.34.3-rc.0", "v1.35.0-rc.1"],
        ["v1.34.2", "v1.35.0-rc.1"],
        ["v1.35.0-rc.1"],
    ),
    Case(
        "a pre-release target whose path has only pre-releases still blocks",
        "v1.33.5",
        ["v1.33.5"],
        "v1.35.0-rc.1",
        ["v1.33.5", "v1.34.0-rc.1", "v1.35.0-rc.1"],
        blocked="only pre-release(s) v1.34.0-rc.1",
    ),
    Case(
        "build metadata is not a pre-release: the last GA twin wins",
        "v1.33.5",
        ["v1.33.5"],
        "v1.35.0",
        ["v1.33.5", "v1.34.2+vendor.1", "v1.34.2+vendor.2", "v1.34.3-rc.0+vendor.1", "v1.35.0"],
        ["v1.34.2+vendor.2", "v1.35.0"],
        ["v1.35.0"],
    ),
    Case(
        "a pre-release with build metadata is still a pre-release",
        "v1.33.5",
        ["v1.33.5"],
        "v1.35.0",
        ["v1.33.5", "v1.34.0-rc.1+vendor.1", "v1.35.0"],
        blocked="only pre-release(s) v1.34.0-rc.1+vendor.1",
    ),
    Case(
        "from a pre-release control plane to GA across minors",
        "v1.33.0-rc.1",
        ["v1.33.0-rc.1"],
        "v1.35.0",
        PRE,
        ["v1.34.2", "v1.35.0"],
        ["v1.35.0"],
    ),
    Case(
        "workers catch up to the pre-release the control plane already runs",
        "v1.32.3-rc.1",
        ["v1.29.0"],
        "v1.33.0",
        ["v1.29.0", "v1.32.2", "v1.32.3-rc.1", "v1.33.0"],
        ["v1.33.0"],
        ["v1.32.3-rc.1", "v1.33.0"],
    ),
    Case(
        "workers' intermediate step lands on the GA patch too",
        "v1.31.13",
        ["v1.31.13"],
        "v1.35.0",
        ["v1.31.13", "v1.32.9", "v1.33.5", "v1.34.2", "v1.34.3-rc.0", "v1.34.4-rc.1", "v1.35.0"],
        ["v1.32.9", "v1.33.5", "v1.34.2", "v1.35.0"],
        ["v1.34.2", "v1.35.0"],
    ),
]


def test_steps_carry_their_from_versions() -> None:
    plan = plan_cluster(cluster("v1.33.1", "v1.33.1", "v1.30.0"), V("v1.34.1"), [V(v) for v in STD])
    assert [
        (s.describe(), str(s.from_version), [(n, str(v)) for n, v in s.pools_from])
        for s in plan.steps
    ] == [
        ("workers md-1 -> v1.33.1", "v1.30.0", [("md-1", "v1.30.0")]),
        ("controlPlane -> v1.34.1", "v1.33.1", []),
        ("workers md-0,md-1 -> v1.34.1", "v1.33.1", [("md-0", "v1.33.1"), ("md-1", "v1.33.1")]),
    ]


@pytest.mark.parametrize("case", PRERELEASE_CASES, ids=[c.name for c in PRERELEASE_CASES])
def test_plan_cluster_prereleases(case: Case) -> None:
    test_plan_cluster(case)


@pytest.mark.parametrize(
    ("cp", "workers", "target", "available"),
    [
        ("v1.33.1", ["v1.33.1"], "v1.32.0", STD),
        ("v1.32.0+foo.2", ["v1.32.0+foo.2"], "v1.32.0+foo.1", ["v1.32.0+foo.1", "v1.32.0+foo.2"]),
        ("v1.32.0", ["v1.32.0"], "v1.32.0-rc.1", ["v1.32.0-rc.1", "v1.32.0"]),
        ("v1.33.1", ["v1.34.1"], "v1.33.1", STD),
    ],
)
def test_downgrades_are_refused(
    cp: str, workers: list[str], target: str, available: list[str]
) -> None:
    with pytest.raises(DowngradeError, match="downgrades are not supported"):
        plan_cluster(cluster(cp, *workers), V(target), [V(v) for v in available])


def test_target_must_be_available() -> None:
    with pytest.raises(InputError, match=r"target v1.36.0 is not in availableVersions \(v1.30.0, "):
        check_target(V("v1.36.0"), [V(v) for v in STD])
    check_target(V("v1.36.0"), [])  # no list: any target, chaining limited to one minor


@pytest.mark.parametrize(
    ("cp", "workers", "cp_steps", "w_steps", "target", "expected"),
    [
        (
            "v1.30.0",
            ["v1.30.0"],
            ["v1.32.0", "v1.33.1"],
            ["v1.33.1"],
            "v1.33.1",
            "control plane cannot go from minor 30 to 32 in one step: it must visit every minor (1.30 -> 1.31 -> 1.32)",
        ),
        (
            "v1.30.0",
            ["v1.30.0"],
            ["v1.31.1", "v1.32.0", "v1.33.1", "v1.34.1"],
            ["v1.34.1"],
            "v1.34.1",
            "workers cannot go from minor 30 (v1.30.0) to minor 34 (v1.34.1)",
        ),
        (
            "v1.32.0",
            ["v1.32.0"],
            ["v1.33.1", "v1.34.1"],
            ["v1.33.1"],
            "v1.34.1",
            "worker plan must end at v1.34.1, ends at v1.33.1",
        ),
        (
            "v1.32.0",
            ["v1.32.0"],
            ["v1.33.1"],
            ["v1.33.1"],
            "v1.34.1",
            "control plane plan must end at v1.34.1, ends at v1.33.1",
        ),
        (
            "v1.32.0",
            ["v1.32.0"],
            ["v1.33.1", "v1.32.0"],
            ["v1.33.1"],
            "v1.33.1",
            "control plane cannot go from v1.33.1 to v1.32.0: downgrades are not supported",
        ),
        (
            "v1.32.0",
            ["v1.32.0"],
            ["v1.33.7"],
            ["v1.33.7"],
            "v1.33.7",
            "v1.33.7 is not in availableVersions",
        ),
        (
            "v1.32.0",
            ["v1.32.0"],
            ["v1.33.1"],
            ["v1.33.1", "v1.33.1"],
            "v1.33.1",
            "must be newer than v1.33.1",
        ),
    ],
)
def test_validator_rejects_illegal_user_plans(
    cp: str, workers: list[str], cp_steps: list[str], w_steps: list[str], target: str, expected: str
) -> None:
    problems = validate_plan(
        cluster(cp, *workers),
        V(target),
        [V(v) for v in cp_steps],
        [V(v) for v in w_steps],
        [V(v) for v in STD],
    )
    assert any(expected in p for p in problems), problems


def test_validator_reports_a_worker_step_ahead_of_the_control_plane() -> None:
    # Workers may never run a newer minor than the API server, even for a moment.
    problems = validate_plan(
        cluster("v1.31.1", "v1.31.1"),
        V("v1.33.1"),
        [V("v1.32.0"), V("v1.33.1")],
        [V("v1.33.1")],
        [V(v) for v in STD],
    )
    assert problems == []
    problems = validate_plan(
        cluster("v1.31.1", "v1.31.1"),
        V("v1.32.0"),
        [V("v1.32.0")],
        [V("v1.33.1")],
        [V(v) for v in STD],
    )
    assert "worker plan must end at v1.32.0, ends at v1.33.1" in problems


def test_validator_accepts_every_plan_the_planner_makes_for_the_reference_fleet() -> None:
    c = cluster("v1.30.0", "v1.30.0", "v1.28.0")
    plan = plan_cluster(c, V("v1.35.2"), [V(v) for v in STD])
    assert (
        validate_plan(
            c, plan.target, plan.control_plane_steps, plan.worker_steps, [V(v) for v in STD]
        )
        == []
    )


# ------------------------------------------------------------------------------------------
# Property: every intermediate state of every generated plan satisfies the skew policy.
# ------------------------------------------------------------------------------------------


@st.composite
def fleet_case(draw: st.DrawFn) -> tuple[Cluster, KubeVersion, list[KubeVersion]]:
    low = draw(st.integers(min_value=20, max_value=34))
    high = draw(st.integers(min_value=low, max_value=low + 7))
    available: list[KubeVersion] = []
    for minor in range(low, high + 1):
        patches = draw(st.lists(st.integers(0, 12), min_size=1, max_size=3, unique=True))
        pre = draw(st.booleans())
        for p in sorted(patches):
            available.append(V(f"v1.{minor}.{p}"))
        if pre:
            available.append(V(f"v1.{minor}.{max(patches) + 1}-rc.1"))
    cp = draw(st.sampled_from(available[: max(1, len(available) // 2)]))
    lag = max_kubelet_lag(V(f"v1.{max(cp.minor - 3, 0)}.0"))
    pools = draw(
        st.lists(
            st.integers(min_value=max(cp.minor - lag, low), max_value=cp.minor),
            min_size=0,
            max_size=3,
        )
    )
    workers = [V(f"v1.{m}.{draw(st.integers(0, 3))}") if m < cp.minor else cp for m in pools]
    target = draw(st.sampled_from([v for v in available if not v < cp]))
    c = Cluster(
        name="gen",
        control_plane=ControlPlaneState(cp, 1),
        machine_deployments=tuple(
            MachineDeploymentState(f"md-{i}", w, 1) for i, w in enumerate(workers)
        ),
    )
    return c, target, available


def _states_are_legal(
    c: Cluster, plan_steps: list[tuple[str, KubeVersion, tuple[str, ...]]]
) -> None:
    # An independent restatement of the policy, so the property does not trust skew.py.
    cp = c.control_plane.version
    pools = {md.name: md.version for md in c.machine_deployments}
    for component, version, names in plan_steps:
        if component == "controlPlane":
            assert version.minor - cp.minor <= 1, f"CP skipped a minor: {cp} -> {version}"
            assert not version < cp, "CP downgraded"
            cp = version
        else:
            for n in names:
                pools[n] = version
        for w in pools.values():
            assert w.minor <= cp.minor, f"kubelet {w} newer than apiserver {cp}"
            assert cp.minor - w.minor <= (3 if w.minor >= 25 else 2), (
                f"kubelet {w} too old for {cp}"
            )


@settings(max_examples=400, deadline=None)
@given(fleet_case(), st.booleans())
def test_every_intermediate_state_of_every_plan_is_legal(
    case: tuple[Cluster, KubeVersion, list[KubeVersion]], allow_prereleases: bool
) -> None:
    c, target, available = case
    plan = plan_cluster(c, target, available, allow_prereleases=allow_prereleases)
    if plan.blocked:
        assert plan.reasons
        return
    if not allow_prereleases:
        # No pre-release is chosen as a step; workers may still catch up to the version the
        # control plane already runs, which is the cluster's own state, not a choice.
        assert not any(v.is_prerelease for v in plan.control_plane_steps[:-1])
        assert not any(
            v.is_prerelease and v != c.control_plane.version for v in plan.worker_steps[:-1]
        )
    # Every step starts from the state the previous steps left: its from-versions are that state.
    cp = c.control_plane.version
    pools = {md.name: md.version for md in c.machine_deployments}
    for step in plan.steps:
        if step.component == "controlPlane":
            assert step.from_version == cp
            cp = step.version
        else:
            assert step.pools_from == tuple((n, pools[n]) for n in step.pools)
            assert step.from_version == min(pools[n] for n in step.pools)
            pools.update(dict.fromkeys(step.pools, step.version))
    _states_are_legal(c, [(s.component, s.version, s.pools) for s in plan.steps])
    final_cp = plan.control_plane_steps[-1] if plan.control_plane_steps else c.control_plane.version
    assert final_cp == target
    if c.machine_deployments:
        assert plan.worker_steps[-1:] in ((target,), ()) and (
            plan.worker_steps or all(md.version == target for md in c.machine_deployments)
        )
    assert validate_plan(c, target, plan.control_plane_steps, plan.worker_steps, available) == []


def test_a_plan_carries_where_it_starts_and_its_step_ids() -> None:
    # What the run's preflight expects and its idempotency keys come from the plan, not from a
    # second read of the snapshot or a formula elsewhere.
    plan = plan_cluster(cluster("v1.32.0", "v1.31.1", "v1.32.0"), V("v1.33.1"), [V(v) for v in STD])
    assert plan.pools_from == (("md-0", V("v1.31.1")), ("md-1", V("v1.32.0")))
    assert plan.topology is True
    assert plan.step_ids("cal") == (
        "cal/c/00-controlPlane-v1.33.1",
        "cal/c/01-workers-v1.33.1",
    )
    blocked = plan.with_block(["no"])
    assert blocked.blocked and blocked.pools_from == plan.pools_from
    assert blocked.reasons == (*plan.reasons, "no")
