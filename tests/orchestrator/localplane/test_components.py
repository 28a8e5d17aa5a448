"""What each plane component runs: ports kept across restarts, command lines, environment."""

from pathlib import Path

import pytest

from orchestrator.localplane.components import (
    CAPD_RESERVED,
    MANAGERS,
    assign_ports,
    manager_argv,
    manager_env,
)


def test_recorded_ports_are_kept_and_the_rest_are_fresh_and_distinct() -> None:
    ports = assign_ports({"ports": {"apiserver": 6443, "etcd-client": "not a port"}})
    assert ports["apiserver"] == 6443
    assert len(ports) == 3 + 3 * len(MANAGERS)
    fresh = [p for name, p in ports.items() if name != "apiserver"]
    assert len(set(fresh)) == len(fresh) and not any(p in CAPD_RESERVED for p in fresh)
    assert assign_ports({"ports": ports}) == ports  # a repaired plane keeps its endpoints


def test_a_manager_serves_its_webhooks_on_its_own_port() -> None:
    ports = assign_ports({})
    capi, bootstrap = MANAGERS[0], MANAGERS[1]
    argv = manager_argv(capi, Path("/bin"), ports, Path("/s/kubeconfig"), Path("/s/certs"))
    assert argv[0] == "/bin/capi-manager"
    assert f"--webhook-port={capi.webhook_port(ports)}" in argv
    assert "--feature-gates=ClusterTopology=true" in argv
    bootstrap_argv = manager_argv(bootstrap, Path("/bin"), ports, Path("/k"), Path("/c"))
    assert not any(a.startswith("--feature-gates") for a in bootstrap_argv)


def test_only_capd_gets_the_docker_host_and_never_one_inherited(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DOCKER_HOST", "unix:///var/run/someone-elses.sock")
    by_name = {m.name: m for m in MANAGERS}
    assert manager_env(by_name["capd"], "unix:///s/docker.sock") == {
        "POD_IP": "127.0.0.1",
        "DOCKER_HOST": "unix:///s/docker.sock",
    }
    assert manager_env(by_name["capd"], None)["DOCKER_HOST"] == ""
    assert "DOCKER_HOST" not in manager_env(by_name["capi"], "unix:///s/docker.sock")
