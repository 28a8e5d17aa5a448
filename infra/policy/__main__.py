"""The policy pack: a thin adapter from pulumi_policy to the pure rules in infra.rules."""

from __future__ import annotations

from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    PolicyPack,
    ReportViolation,
    StackValidationArgs,
    StackValidationPolicy,
)

from infra.rules import ALLOWED_POLICY, SKEW_POLICY, ResourceView, fleet_violations


def _validator(policy: str):  # type: ignore[no-untyped-def]
    def validate(args: StackValidationArgs, report_violation: ReportViolation) -> None:
        allowed = (args.get_config() or {}).get("allowedVersions")
        views = [ResourceView(r.urn, r.props) for r in args.resources]
        for violation in fleet_violations(views, allowed):
            if violation.policy == policy:
                report_violation(violation.message, violation.urn)

    return validate


PolicyPack(
    name="calibrator-fleet-policy",
    enforcement_level=EnforcementLevel.MANDATORY,
    policies=[
        StackValidationPolicy(
            name=SKEW_POLICY,
            description="Kubelets never newer than the API server and at most 3 minors older.",
            validate=_validator(SKEW_POLICY),
        ),
        StackValidationPolicy(
            name=ALLOWED_POLICY,
            description="Every version is valid and in allowedVersions (default: the ClusterClass list).",
            validate=_validator(ALLOWED_POLICY),
            config_schema=PolicyConfigSchema(
                properties={"allowedVersions": {"type": "array", "items": {"type": "string"}}}
            ),
        ),
    ],
)
