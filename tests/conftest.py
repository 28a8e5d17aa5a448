"""Suite-wide set-up: under pytest-xdist, each worker runs in a network namespace of its own, and
the files that run on a real plane or Temporal dev server are handed out first."""

from __future__ import annotations

import os
from collections.abc import Sequence

import pytest

from tests.netns import enter_private_network_namespace


def pytest_configure(config: pytest.Config) -> None:
    if os.environ.get("PYTEST_XDIST_WORKER"):
        enter_private_network_namespace()


def runs_long(nodeid: str) -> bool:
    """Whether a test's file runs on a real local plane or a Temporal dev server (minutes a file,
    against seconds for a unit test file)."""
    path = nodeid.split("::", 1)[0]
    return path.startswith("tests/integration/") or path.endswith("_dev_server.py")


def long_first(nodeids: Sequence[str]) -> list[int]:
    """The positions of `nodeids` with the long-running files' tests first, each group in its
    given order (a stable sort, so pytest-randomly's seeded order holds within each group)."""
    return sorted(range(len(nodeids)), key=lambda i: not runs_long(nodeids[i]))


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Long files first, so the parallel suite does not end on one worker running one of them alone.

    `.ci/run` gives pytest-xdist `--dist loadfile --no-loadscope-reorder`: files are then handed
    out in collection order. xdist's default orders them by test count instead, which put these
    few-test, minutes-long files last; the unit test files (many tests, seconds each) now fill the
    workers' gaps at the end. Runs after pytest-randomly's shuffle (a wrapper that shuffles before
    every plain implementation), which it keeps within each group.
    """
    order = long_first([item.nodeid for item in items])
    items[:] = [items[i] for i in order]
