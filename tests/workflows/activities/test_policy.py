"""The evaluate_policy activity and scoped planning (no server): bounded, content-addressed."""

from __future__ import annotations

import asyncio
import hashlib
import json
from datetime import UTC, datetime
from typing import Any

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from testkit.workflow_harness import cluster, in_memory
from workflows.activities import INVALID_INPUT, NOT_FOUND, CalibrationActivities
from workflows.activities.plan_payload import encode_scope
from workflows.model import SAMPLE_LIMIT, EvaluateInput, PlanInput, ScopeRef
from workflows.payloads import DATA_CONVERTER

NOW = datetime(2026, 3, 15, 10, 0, tzinfo=UTC)
POLICY: dict[str, Any] = {"kind": "CalibrationPolicy", "rules": {"maxMinorsBehind": 0}}


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_the_report_stays_bounded_at_ten_thousand_clusters() -> None:
    clusters = [cluster(f"c{i:05d}", "v1.32.9" if i % 2 else "v1.33.5") for i in range(10_000)]
    fleet = in_memory(*clusters)
    report = run(ActivityEnvironment().run(CalibrationActivities(fleet).evaluate_policy,
                                           EvaluateInput(POLICY, NOW)))  # fmt: skip
    assert (report.checked, report.violating) == (10_000, 5_000)
    assert report.counts == {"due": 5_000, "deferred": 0, "busy": 0, "unfixable": 0}
    (group,) = report.groups
    assert (group.target, group.scope.clusters) == ("v1.33.5", 5_000)
    assert len(group.sample) == SAMPLE_LIMIT and len(report.sample) == SAMPLE_LIMIT
    # The names live in the blob store under their digest, not in the payload.
    stored = json.loads(fleet.blobs[group.scope.digest])
    names = stored["clusters"]
    assert len(names) == 5_000 and names == sorted(names)
    assert hashlib.sha256(fleet.blobs[group.scope.digest]).hexdigest() == group.scope.digest
    (payload,) = DATA_CONVERTER.payload_converter.to_payloads([report])
    assert len(payload.data) < 32 * 1024, len(payload.data)


def test_a_compliant_fleet_stores_nothing() -> None:
    fleet = in_memory(cluster("a", "v1.33.5"))
    report = run(ActivityEnvironment().run(CalibrationActivities(fleet).evaluate_policy,
                                           EvaluateInput(POLICY, NOW)))  # fmt: skip
    assert (report.violating, report.groups, fleet.blobs) == (0, (), {})


def test_a_bad_policy_is_non_retryable() -> None:
    fleet = in_memory(cluster("a", "v1.33.5"))
    bad = {"rules": {"channel": "rapid"}}
    with pytest.raises(ApplicationError) as caught:
        run(ActivityEnvironment().run(CalibrationActivities(fleet).evaluate_policy,
                                      EvaluateInput(bad, NOW)))  # fmt: skip
    assert caught.value.type == INVALID_INPUT and caught.value.non_retryable


@pytest.mark.parametrize(
    ("scope", "planned"),
    [
        (("a",), {"a"}),
        (("a", "c", "gone"), {"a", "c"}),  # a cluster deleted since the evaluation is absent
    ],
)
def test_plan_fleet_plans_only_the_scoped_clusters(
    scope: tuple[str, ...], planned: set[str]
) -> None:
    fleet = in_memory(cluster("a", "v1.32.9"), cluster("b", "v1.32.9"), cluster("c", "v1.32.9"))
    digest, data = encode_scope(scope, "continuous-1")
    fleet.blobs[digest] = data
    acts = CalibrationActivities(fleet)
    summary = run(ActivityEnvironment().run(
        acts.plan_fleet, PlanInput("cal", "v1.33.5", None, scope=ScopeRef(digest, len(scope)))
    ))  # fmt: skip
    assert summary.clusters == len(planned)
    assert {c.name for c in summary.notable} == planned


@pytest.mark.parametrize(
    ("stored", "error"),
    [
        (None, NOT_FOUND),  # the scope was never stored
        (b'["a"]', NOT_FOUND),  # stored bytes that do not match the digest
    ],
)
def test_a_missing_or_corrupt_scope_fails(stored: bytes | None, error: str) -> None:
    fleet = in_memory(cluster("a", "v1.32.9"))
    digest = hashlib.sha256(b'["b"]').hexdigest()
    if stored is not None:
        fleet.blobs[digest] = stored
    with pytest.raises(ApplicationError) as caught:
        run(ActivityEnvironment().run(
            CalibrationActivities(fleet).plan_fleet,
            PlanInput("cal", "v1.33.5", None, scope=ScopeRef(digest, 1)),
        ))  # fmt: skip
    assert caught.value.type == error


def test_a_scope_with_no_cluster_left_is_invalid_input() -> None:
    fleet = in_memory(cluster("a", "v1.32.9"))
    digest, data = encode_scope(["gone"], "continuous-1")
    fleet.blobs[digest] = data
    with pytest.raises(ApplicationError) as caught:
        run(ActivityEnvironment().run(
            CalibrationActivities(fleet).plan_fleet,
            PlanInput("cal", "v1.33.5", None, scope=ScopeRef(digest, 1)),
        ))  # fmt: skip
    assert caught.value.type == INVALID_INPUT
    assert "none of the 1 scoped cluster(s) is in the fleet" in str(caught.value)
