"""What is left of a recorded TTL."""

import time

from orchestrator.localplane import ttl


def test_remaining_ttl_of_a_recorded_deadline() -> None:
    assert ttl.remaining(None) == 0
    assert ttl.remaining(True) == 0
    assert ttl.remaining(time.time() - 5) == 0
    assert 50 <= ttl.remaining(time.time() + 60) <= 60
