"""Suite-wide set-up: under pytest-xdist, each worker runs in a network namespace of its own."""

from __future__ import annotations

import os

import pytest

from tests.netns import enter_private_network_namespace


def pytest_configure(config: pytest.Config) -> None:
    if os.environ.get("PYTEST_XDIST_WORKER"):
        enter_private_network_namespace()
