"""The worker's strict decoding of client-sent types (workflows/payloads.py), without a server.

tests/workflows/test_bad_input_dev_server.py sends the same kind of payloads through the real dev
server; here the converter alone: good payloads of every strict type decode as before, bad ones
raise one short non-retryable InvalidInput naming the field.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from temporalio.converter import DataConverter
from temporalio.exceptions import ApplicationError

from orchestrator.domain.compatibility import Finding
from orchestrator.domain.versions import KubeVersion
from testkit.workflow_harness import FAST, one_step_run
from workflows.model import (
    AbortRequest,
    ApproveRequest,
    CalibrationCheckpoint,
    CalibrationInput,
    CalibrationProgress,
    CheckResult,
    ClusterCommand,
    ClusterUpgradeInput,
    ContinuousInput,
    Decision,
    PauseRequest,
    Phase,
    PlanRef,
    ResumeRequest,
    RetryRequest,
    ScopeRef,
    SkipRequest,
)
from workflows.payloads import DATA_CONVERTER, STRICT_TYPES, StrictPayloadConverter

STRICT = StrictPayloadConverter()
PLAN = one_step_run(namespace="ns")
GOOD: list[object] = [
    CalibrationInput(
        "v1.33.5",
        snapshot={"clusters": []},
        strategy={"stages": [{"name": "a"}]},
        selector="env=prod",
        options=FAST,
        scope=ScopeRef("d", 3),
    ),
    ContinuousInput({"kind": "CalibrationPolicy"}, FAST),
    ClusterUpgradeInput("x", "v1.33.5", "s", PLAN, FAST),
    ClusterUpgradeInput("x", "v1.33.5", "s", None, FAST, PlanRef("d", 10)),
    PauseRequest("r"),
    ResumeRequest(),
    ApproveRequest("prod", "ok"),
    SkipRequest("a"),
    RetryRequest("a", "again"),
    AbortRequest("stop"),
    Decision("retry"),
    ClusterCommand("skip", "r"),
]


def _raw(value: object) -> Any:
    return DATA_CONVERTER.payload_converter.to_payloads([value])


@pytest.mark.parametrize("value", GOOD, ids=[type(v).__name__ for v in GOOD])
def test_every_strict_type_decodes_what_our_clients_send(value: object) -> None:
    assert {type(v) for v in GOOD} == STRICT_TYPES
    assert STRICT.from_payloads(_raw(value), [type(value)]) == [value]


def test_a_checkpoint_keeps_lenient_field_checks_for_continue_as_new() -> None:
    """A field dropped by a later version must not fail a run continued by an older worker."""
    progress = CalibrationProgress("c", "v1.33.5", Phase.RUNNING)
    value = CalibrationInput("v1.33.5", checkpoint=CalibrationCheckpoint(progress))
    raw = json.loads(_raw(value)[0].data)
    raw["checkpoint"]["dropped_later"] = 1
    raw["checkpoint"]["progress"]["dropped_later"] = 1
    assert STRICT.from_payloads(_raw(raw), [CalibrationInput]) == [value]


BAD: list[tuple[type, object, str]] = [
    (CalibrationInput, {"target": 5}, "target: Expected value to be str, was int"),
    (CalibrationInput, {"target": "v1", "optoins": {}}, "unknown field(s) 'optoins'"),
    (
        CalibrationInput,
        {"target": "v1", "options": {"timeouts": {"rollout_secnds": 1}}},
        "CalibrationInput.options.timeouts: unknown field(s) 'rollout_secnds'",
    ),
    (CalibrationInput, {"target": "v1", "scope": {"digest": None}}, "scope: digest: Expected"),
    (CalibrationInput, "x" * 100_000, "expected a JSON object, got 'xxx"),
    (
        ClusterUpgradeInput,
        {
            "calibration_id": "x",
            "target": "v1",
            "stage": "s",
            "plan": {**json.loads(_raw(PLAN)[0].data), "nmespace": "n"},
        },
        "ClusterUpgradeInput.plan: unknown field(s) 'nmespace'",
    ),
    (
        ClusterUpgradeInput,
        {
            "calibration_id": "x",
            "target": "v1",
            "stage": "s",
            "plan": {"cluster": {"name": "a"}, "steps": [{"component": "workers", "bogus": 1}]},
        },
        "plan.steps[0]: unknown field(s) 'bogus'",  # an old-shaped plan: named as it was sent
    ),
    (
        ClusterUpgradeInput,
        {
            "calibration_id": "x",
            "target": "v1",
            "stage": "s",
            "plan": {
                **json.loads(_raw(PLAN)[0].data),
                "plan": {**json.loads(_raw(PLAN.plan)[0].data), "control_plane_from": "1.x"},
            },
        },
        "control_plane_from: invalid Kubernetes version '1.x'",
    ),
    (ContinuousInput, {"policy": "x"}, "policy: Expected"),
    (Decision, {"action": "explode"}, "action: Value explode not in literal values"),
    (ApproveRequest, {"stage": "s" * 2000}, "stage: longer than 1024 characters"),
    (SkipRequest, {"cluster": "a", "reson": "x"}, "unknown field(s) 'reson'"),
]


@pytest.mark.parametrize(("hint", "raw", "message"), BAD, ids=[b[2][:30] for b in BAD])
def test_a_bad_payload_is_one_short_non_retryable_invalid_input(
    hint: type, raw: object, message: str
) -> None:
    with pytest.raises(ApplicationError) as err:
        STRICT.from_payloads(_raw(raw), [hint])
    assert err.value.type == "InvalidInput" and err.value.non_retryable
    assert message in err.value.message, err.value.message
    assert "\n" not in err.value.message and len(err.value.message) <= 300


def test_other_types_keep_the_sdks_lenient_decoding() -> None:
    """Activity results are our own payloads: a field a later version dropped is ignored."""
    raw = {"digest": "d", "size": 1, "dropped_later": 1}
    assert STRICT.from_payloads(_raw(raw), [PlanRef]) == [PlanRef("d", 1)]


def test_a_version_is_its_text_in_json_at_any_depth_and_decodes_back() -> None:
    finding = Finding(
        "a", "w", "extensions/v1beta1", "1.22", "apps/v1", KubeVersion.parse("v1.22.3")
    )
    (payload,) = _raw(CheckResult((finding,), ("seen",)))
    assert json.loads(payload.data)["findings"][0]["version"] == "v1.22.3"
    assert STRICT.from_payloads([payload], [CheckResult]) == [CheckResult((finding,), ("seen",))]


def test_a_finding_recorded_before_it_was_the_domain_finding_still_decodes() -> None:
    """Histories hold check results whose findings had only workload, api and removal."""
    old = {"findings": [{"workload": "w", "api": "batch/v1beta1", "removed_in": "1.25"}]}
    (result,) = STRICT.from_payloads(_raw(old), [CheckResult])
    (finding,) = result.findings
    assert (finding.workload, finding.api, finding.removed_in) == ("w", "batch/v1beta1", "1.25")
    assert finding.version == KubeVersion.parse("v1.25.0")


def test_a_version_written_by_the_sdks_default_converter_is_refused_not_misread() -> None:
    """A client that missed our converter writes a version as its fields: one clear error."""
    sent = ClusterUpgradeInput("x", "v1.33.5", "s", PLAN, FAST)
    with pytest.raises(ApplicationError) as err:
        STRICT.from_payloads(
            DataConverter.default.payload_converter.to_payloads([sent]), [type(sent)]
        )
    assert err.value.type == "InvalidInput"
    assert "control_plane_from: expected a version string" in err.value.message
