"""Which control-plane endpoints an observation dials (the rest runs on the real plane)."""

from __future__ import annotations

import pytest

from orchestrator.kube.apiusage import valid_endpoint


@pytest.mark.parametrize(
    ("text", "endpoint"),
    [
        ("10.0.0.5:6443", "10.0.0.5:6443"),
        (" 172.18.0.3:6443 ", "172.18.0.3:6443"),
        ("[fd00::5]:6443", "[fd00::5]:6443"),
        ("cp-0.example.com:443", "cp-0.example.com:443"),
        ("10.0.0.5", None),
        ("10.0.0.5:0", None),
        ("10.0.0.5:70000", None),
        ("[fd00::zz]:6443", None),
        ("fd00::5:6443", None),
        ("http://10.0.0.5:6443", None),
        ("10.0.0.5:6443/evil", None),
        ("user@10.0.0.5:6443", None),
        ("", None),
    ],
)
def test_valid_endpoint(text: str, endpoint: str | None) -> None:
    assert valid_endpoint(text) == endpoint
