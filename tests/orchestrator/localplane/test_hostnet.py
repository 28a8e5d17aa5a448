"""The pure rules of the host's networking: the FORWARD policy, stale bridges and their rules."""

import pytest

from orchestrator.localplane import hostnet


@pytest.mark.parametrize(
    ("rules", "policy"),
    [
        ("-P FORWARD ACCEPT\n-A FORWARD -j DOCKER-USER\n", "ACCEPT"),
        ("-P FORWARD DROP\n", "DROP"),
        ("-A FORWARD -j DOCKER-USER\n", None),
        ("", None),
        ("-P FORWARD QUEUE\n", None),
        ("-P INPUT DROP\n-P FORWARD ACCEPT\n", "ACCEPT"),
    ],
)
def test_forward_policy_is_read_from_iptables_rules(rules: str, policy: str | None) -> None:
    assert hostnet.parse_forward_policy(rules) == policy


OWN_ID = "04f352ba7def" + "a" * 52


@pytest.mark.parametrize(
    ("addresses", "ported", "stale", "foreign"),
    [
        pytest.param([], set(), [], [], id="nothing-holds-the-gateway"),
        pytest.param(
            [("br-430835409b16", "172.30.0.1"), ("eth0", "192.0.2.2")],
            set(),
            ["br-430835409b16"],
            [],
            id="an-earlier-engines-empty-bridge-is-stale",
        ),
        pytest.param(
            [("br-04f352ba7def", "172.30.0.1")], set(), [], [], id="this-engines-own-bridge"
        ),
        pytest.param(
            [("br-430835409b16", "172.30.0.1")],
            {"br-430835409b16"},
            [],
            ["br-430835409b16"],
            id="a-bridge-with-containers-is-not-ours-to-delete",
        ),
        pytest.param(
            [("virbr0", "172.30.0.1"), ("br-1", "172.30.0.1")],
            set(),
            [],
            ["virbr0", "br-1"],
            id="interfaces-that-are-not-docker-bridges",
        ),
        pytest.param(
            [("br-430835409b16", "172.30.0.9")], set(), [], [], id="another-address-in-the-subnet"
        ),
    ],
)
def test_classify_gateway_holders(
    addresses: list[tuple[str, str]], ported: set[str], stale: list[str], foreign: list[str]
) -> None:
    got = hostnet.classify_gateway_holders(
        addresses, "172.30.0.1", [OWN_ID], lambda ifname: ifname in ported
    )
    assert got == (stale, foreign)


RULES = """-P POSTROUTING ACCEPT
-N DOCKER
-A POSTROUTING -s 172.30.0.0/16 ! -o br-cd0955f3380b -j MASQUERADE
-A POSTROUTING -s 172.30.0.0/16 ! -o br-430835409b16 -j MASQUERADE
-A POSTROUTING -s 172.29.0.0/16 ! -o fc-docker0 -j MASQUERADE
-A FORWARD -i br-430835409b16 -o br-430835409b16 -m comment --comment "two words" -j ACCEPT
-A DOCKER -i br-cd0955f3380b -j RETURN
"""


def test_stale_bridge_rules_name_only_bridges_that_are_gone() -> None:
    got = hostnet.stale_bridge_rules(RULES, {"br-cd0955f3380b", "fc-docker0", "eth0"})
    assert got == [
        ["-D", "POSTROUTING", "-s", "172.30.0.0/16", "!", "-o", "br-430835409b16", "-j",
         "MASQUERADE"],
        ["-D", "FORWARD", "-i", "br-430835409b16", "-o", "br-430835409b16", "-m", "comment",
         "--comment", "two words", "-j", "ACCEPT"],
    ]  # fmt: skip


def test_stale_bridge_rules_keep_everything_when_every_bridge_lives() -> None:
    assert hostnet.stale_bridge_rules(RULES, {"br-cd0955f3380b", "br-430835409b16"}) == []
