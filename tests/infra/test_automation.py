from __future__ import annotations

from pulumi.automation import CommandResult
from pulumi.automation.errors import CommandError

from infra.automation import engine_error

POLICY_OUTPUT = """
Policies:
    ❌ calibrator-fleet-policy@v0.0.1 (local: /tmp/.../policy/run-pack)
        - [mandatory]  capi-version-skew  (kubernetes:cluster.x-k8s.io/v1beta2:MachineDeployment: md)
          Kubelets never newer than the API server and at most 3 minors older.
          cluster c: workers c-md-0 at v1.31.0 are 4 minors behind the control plane at v1.35.0

Diagnostics:
  pulumi:pulumi:Stack (calibrator-fleet-local):
    error: preview failed
"""


def _error(stdout: str, stderr: str = "") -> CommandError:
    return CommandError(CommandResult(stdout=stdout, stderr=stderr, code=255))


def test_policy_violations_become_one_line_with_the_message() -> None:
    assert engine_error(_error(POLICY_OUTPUT)) == (
        "policy capi-version-skew: cluster c: workers c-md-0 at v1.31.0 are 4 minors behind "
        "the control plane at v1.35.0"
    )


def test_other_failures_keep_the_engine_error_lines() -> None:
    text = "Updating (local):\n error: could not reach the cluster\n error: update failed\n"
    assert engine_error(_error(text)) == "error: could not reach the cluster; error: update failed"
