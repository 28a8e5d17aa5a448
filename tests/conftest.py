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


def rank(nodeid: str, slow: bool) -> int:
    """When a test's file is handed out: 0 for the files marked ``slow`` (several minutes each on a
    real plane), 1 for the other files on a real local plane or a Temporal dev server (a minute or
    two), 2 for the rest (seconds a file)."""
    if slow:
        return 0
    path = nodeid.split("::", 1)[0]
    return 1 if path.startswith("tests/integration/") or path.endswith("_dev_server.py") else 2


def longest_first(ranks: Sequence[int]) -> list[int]:
    """The positions of the tests in order of rank, each rank in its given order (a stable sort,
    so pytest-randomly's seeded order holds within each rank)."""
    return sorted(range(len(ranks)), key=lambda i: ranks[i])


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Longest files first, so the parallel suite does not end on one worker running one alone.

    `.ci/run` gives pytest-xdist `--dist loadfile --no-loadscope-reorder`: files are then handed
    out in collection order. xdist's default orders them by test count instead, which put the
    few-test, minutes-long files last; the unit test files (many tests, seconds each) now fill the
    workers' gaps at the end. Runs after pytest-randomly's shuffle (a wrapper that shuffles before
    every plain implementation), which it keeps within each rank.
    """
    order = longest_first(
        [rank(item.nodeid, item.get_closest_marker("slow") is not None) for item in items]
    )
    items[:] = [items[i] for i in order]
