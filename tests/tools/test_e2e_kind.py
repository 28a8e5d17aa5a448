"""tools/e2e-kind.sh: the management cluster's kind config it gives kind, and its input checks.

Only the parts that run without a Docker engine or a network namespace; the bring-up itself is
measured in docs/kind.md, section 6.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tools" / "e2e-kind.sh"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), *args], capture_output=True, text=True, timeout=60, check=False
    )


def test_management_config_mounts_the_given_engine_socket_where_capd_looks() -> None:
    done = run("management-config", "/tmp/fc-e2e-kind/docker/docker.sock")
    assert done.returncode == 0, done.stderr
    doc = yaml.safe_load(done.stdout)
    original = yaml.safe_load((ROOT / "kind-configs" / "management.yaml").read_text())
    mounts = doc["nodes"][0]["extraMounts"]
    assert mounts == [
        {"hostPath": "/tmp/fc-e2e-kind/docker/docker.sock", "containerPath": "/var/run/docker.sock"}
    ]
    # Nothing else changes: same name, API server address, node list.
    doc["nodes"][0]["extraMounts"] = original["nodes"][0]["extraMounts"]
    assert doc == original


def test_management_config_refuses_a_relative_or_unsafe_socket_path() -> None:
    for bad in ("docker.sock", "/tmp/a b/docker.sock", "/tmp/a|b", "/tmp/a&b"):
        done = run("management-config", bad)
        assert done.returncode == 1
        assert done.stdout == ""
        assert "the socket must be an absolute path" in done.stderr


def test_unknown_command_and_bad_numbers_are_one_clear_error() -> None:
    done = run("bogus")
    assert done.returncode == 1
    assert "unknown command: bogus" in done.stderr
    done = run("status", "--ttl", "ten")
    assert done.returncode == 1
    assert "--ttl and --timeout take whole seconds" in done.stderr
    done = run("up", "--netns", "a/b")
    assert done.returncode == 1
    assert "--netns: letters, digits" in done.stderr
    for bad in ("0", "9", "six"):  # the fleet of benchmarks/bench_kind_fleet.py has 8 members
        done = run("run", "--clusters", bad)
        assert done.returncode == 1
        assert f"--clusters takes 1..8, got: {bad}" in done.stderr


def _pin(script: str, name: str) -> str:
    """The value of ``NAME=value`` at the start of a line of a shell script (comment cut)."""
    return next(
        line.split("=", 1)[1].split()[0]
        for line in script.splitlines()
        if line.startswith(f"{name}=")
    )


def test_default_versions_have_node_images_and_are_in_the_docker_class() -> None:
    """The management node and the workload default to a version the kind set builds a node
    image for (nothing can be pulled) and that the docker ClusterClass lists."""
    script = SCRIPT.read_text()
    build = (ROOT / "tools" / "build.sh").read_text()
    built = _pin(build, "KIND_NODE_VERSIONS").strip("()").split()
    docs = yaml.safe_load_all(
        (ROOT / "capi-templates" / "docker" / "clusterclass.yaml").read_text()
    )
    klass = next(d for d in docs if d and d["kind"] == "ClusterClass")
    listed = klass["spec"]["kubernetesVersions"]
    for name in ("NODE_VERSION", "WORKLOAD_VERSION"):
        version = _pin(script, name)
        assert version in built, (name, version, built)
        assert version in listed, (name, version, listed)


def test_help_names_every_option_the_parser_takes() -> None:
    """``--help`` prints the whole header (it grew past a fixed line range once), and every
    ``--option`` the parser accepts is documented there."""
    done = run("--help")
    assert done.returncode == 0, done.stderr
    script = SCRIPT.read_text()
    for option in (
        "--state-dir",
        "--netns",
        "--node-version",
        "--workload-version",
        "--ttl",
        "--timeout",
        "--no-raise-inotify",
    ):
        assert f"{option})" in script or f"{option}|" in script, option
        assert option in done.stderr, option
    assert "Needs root" in done.stderr
