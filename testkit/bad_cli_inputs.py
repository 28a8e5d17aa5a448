"""The CLI's bad-input corpus: snapshot files, strategy files and flags, each with its message.

Snapshot files, strategy files and flags a new user (or an attacker) might hand the offline
commands, each with the fragment its one ``error:`` line must hold. The tests
(tests/orchestrator/cli/test_bad_input.py) run every case through the CLI; benchmarks/bad_inputs.py
prints the figures.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).parents[1]
FLEET: dict[str, Any] = yaml.safe_load((ROOT / "examples" / "fleet.yaml").read_text())
STRATEGY: dict[str, Any] = yaml.safe_load((ROOT / "examples" / "strategy.yaml").read_text())
TARGET = "v1.35.0"


def alias_bomb(levels: int = 9) -> str:
    """A small YAML whose aliases expand exponentially."""
    text = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    for i in range(1, levels + 1):
        prev, cur = chr(ord("a") + i - 1), chr(ord("a") + i)
        text += f"{cur}: &{cur} [" + ",".join(["*" + prev] * 9) + "]\n"
    return text


def _fleet(change: Callable[[dict[str, Any]], object]) -> str:
    doc = copy.deepcopy(FLEET)
    change(doc)
    return yaml.safe_dump(doc, sort_keys=False)


def _strategy(change: Callable[[dict[str, Any]], object]) -> str:
    doc = copy.deepcopy(STRATEGY)
    change(doc)
    return yaml.safe_dump(doc, sort_keys=False)


def _set(path: str, value: object) -> Callable[[dict[str, Any]], None]:
    """Set ``a.0.b`` (list indices as numbers) in a document."""

    def change(doc: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node: Any = doc
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node[part]
        if isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value

    return change


def _do(*changes: Callable[[dict[str, Any]], object]) -> Callable[[dict[str, Any]], None]:
    def change(doc: dict[str, Any]) -> None:
        for c in changes:
            c(doc)

    return change


def _dup_cluster(doc: dict[str, Any]) -> None:
    doc["clusters"].append(copy.deepcopy(doc["clusters"][0]))


def _dup_workload(doc: dict[str, Any]) -> None:
    doc["workloads"].append(copy.deepcopy(doc["workloads"][0]))


def _dup_taint(doc: dict[str, Any]) -> None:
    taints = doc["clusters"][3]["taints"]
    taints.append(dict(taints[0], value="other"))


# (id, snapshot text or bytes, message fragment)
SNAPSHOTS: list[tuple[str, str | bytes, str]] = [
    ("alias-bomb", alias_bomb(), "aliases expand to more than"),
    ("deep-flow-20k", "clusters: " + "[" * 20_000 + "]" * 20_000, "nests deeper than 64"),
    ("deep-json-20k", "[" * 20_000 + "]" * 20_000, "nests too deep"),
    ("deep-block-20k", "clusters:\n" + "- " * 20_000 + "x\n", "nests deeper than 64"),
    (
        "int-5000-digits",
        _fleet(_set("clusters.0.controlPlane.replicas", 0)).replace(
            "replicas: 0", "replicas: " + "9" * 5000, 1
        ),
        "integer of 5000 digits",
    ),
    ("cpu-1e1000000", _fleet(_set("clusters.0.capacity.cpu", "1e1000000")), "out of range"),
    (
        "cpu-float-overflow",
        _fleet(_set("clusters.0.capacity", {"cpu": 1e308, "memory": "1Gi"})),
        "cpu",
    ),
    ("memory-negative", _fleet(_set("clusters.0.capacity.memory", "-1Gi")), "invalid memory"),
    (
        "zones-string",
        _fleet(_set("clusters.0.zones", "eu-1a")),
        "clusters[0].zones: expected a list",
    ),
    (
        "region-bool",
        _fleet(_set("clusters.0.region", True)),
        "clusters[0].region: must be a string",
    ),
    (
        "fieldSelector.Exists",
        _fleet(
            _set(
                "workloads.0.placement.clusterAffinity",
                {"fieldSelector": {"matchExpressions": [{"key": "zone", "operator": "Exists"}]}},
            )
        ),
        "operator: must be one of In, NotIn",
    ),
    (
        "spread.minGroup",
        _fleet(
            _set(
                "workloads.0.placement.spreadConstraints",
                [{"spreadByField": "zone", "minGroup": 2}],
            )
        ),
        "unknown field(s) minGroup",
    ),
    (
        "controlPlane.replica",
        _fleet(_set("clusters.0.controlPlane.replica", 3)),
        "unknown field(s) replica",
    ),
    ("capacity.cpus", _fleet(_set("clusters.0.capacity.cpus", "8")), "unknown field(s) cpus"),
    (
        "taint.efect",
        _fleet(_set("clusters.3.taints.0.efect", "NoSchedule")),
        "unknown field(s) efect",
    ),
    (
        "md.versoin",
        _fleet(_set("clusters.0.machineDeployments.0.versoin", "v1")),
        "unknown field(s) versoin",
    ),
    (
        "toleration.operater",
        _fleet(_set("workloads.0.placement.tolerations", [{"key": "a", "operater": "Exists"}])),
        "unknown field(s) operater",
    ),
    (
        "duplicate-yaml-key",
        "apiVersion: calibrator.dev/v1alpha1\nclusters: []\nclusters: []\n",
        "duplicate key 'clusters'",
    ),
    ("duplicate-json-key", '{"clusters": [], "clusters": []}', "duplicate key 'clusters'"),
    ("duplicate-cluster", _fleet(_dup_cluster), "duplicate cluster name(s) 'prod-eu-1'"),
    ("duplicate-workload", _fleet(_dup_workload), "duplicate workload"),
    ("duplicate-taint", _fleet(_dup_taint), "duplicate taint"),
    (
        "topology-string-false",
        _fleet(_set("clusters.0.topology", "false")),
        "must be true or false, got 'false'",
    ),
    ("apiVersion-v9", _fleet(_set("apiVersion", "v9")), "snapshot.apiVersion"),
    ("kind-wrong", _fleet(_set("kind", "Fleet")), "snapshot.kind"),
    (
        "version-4mb",
        _fleet(_set("clusters.0.controlPlane.version", "v" + "1" * 4_000_000)),
        "invalid Kubernetes version",
    ),
    (
        "version-garbage",
        _fleet(_set("clusters.0.controlPlane.version", "one.two")),
        "invalid Kubernetes version",
    ),
    # Names as Kubernetes has them (orchestrator/domain/names.py), versions exactly as written.
    (
        "cluster-name-path",
        _fleet(_set("clusters.0.name", "../../etc/prod-eu-1")),
        "clusters[0].name: must be a DNS-1123 subdomain",
    ),
    (
        "cluster-name-upper-space",
        _fleet(_set("clusters.0.name", "Dev_AP 2!")),
        "clusters[0].name: must be a DNS-1123 subdomain",
    ),
    (
        "cluster-name-64",
        _fleet(_set("clusters.0.name", "c" * 64)),
        "clusters[0].name: must be at most 63 characters",
    ),
    (
        "md-name-underscore",
        _fleet(_set("clusters.0.machineDeployments.0.name", "md_0")),
        "machineDeployments[0].name: must be a DNS-1123 subdomain",
    ),
    (
        "workload-name-upper",
        _fleet(_set("workloads.0.name", "Checkout")),
        "workloads[0].name: must be a DNS-1123 subdomain",
    ),
    (
        "namespace-dotted",
        _fleet(_set("workloads.0.namespace", "team.shop")),
        "workloads[0].namespace: must be a DNS-1123 label",
    ),
    (
        "cluster-ref-bad",
        _fleet(_set("workloads.0.placement.clusters", ["Dev_AP 2!"])),
        "placement.clusters[0]: must be a DNS-1123 subdomain",
    ),
    (
        "version-newline",
        _fleet(_set("clusters.0.controlPlane.version", "v1.34.2\n")),
        "leading or trailing whitespace",
    ),
    (
        "available-version-space",
        _fleet(_set("availableVersions.0", " v1.33.4")),
        "availableVersions[0]: invalid Kubernetes version ' v1.33.4'",
    ),
    (
        "network-self",
        _fleet(_set("network", [{"from": "prod-eu-1", "to": "prod-eu-1", "rttMs": 1}])),
        "network[0]: from and to are the same cluster 'prod-eu-1'",
    ),
    (
        "rtt-nan",
        _fleet(_set("network", [{"from": "prod-eu-1", "to": "prod-us-1", "rttMs": float("nan")}])),
        "rttMs",
    ),
    (
        "rtt-negative",
        _fleet(_set("network", [{"from": "prod-eu-1", "to": "prod-us-1", "rttMs": -1}])),
        "rttMs",
    ),
    ("label-list", _fleet(_set("clusters.0.labels.env", ["prod"])), "label values must be strings"),
    ("replicas-billion", _fleet(_set("workloads.0.replicas", 10**9)), "from 0 to 1,000,000"),
    ("maxClusters-zero", _fleet(_set("workloads.0.placement.maxClusters", 0)), "maxClusters"),
    (
        "unknown-cluster-ref",
        _fleet(_set("workloads.0.placement.clusters", ["nowhere"])),
        "unknown cluster 'nowhere'",
    ),
    (
        "timestamp-invalid",
        _fleet(_set("clusters.3.taints.0.timeAdded", "X")).replace(
            "timeAdded: X", "timeAdded: 2026-13-45", 1
        ),
        "invalid timestamp",
    ),
    (
        "timeAdded-list",
        _fleet(_set("clusters.3.taints.0.timeAdded", [1, 2])),
        "timeAdded: must be an RFC 3339 time",
    ),
    (
        "apiUsage-removedRelease-number",
        _fleet(
            _set(
                "clusters.0.workloadCluster",
                {
                    "reachable": True,
                    "apiUsage": [
                        {
                            "api": "storage.k8s.io/v1alpha1/VolumeAttributesClass",
                            "resource": "volumeattributesclasses",
                            "source": "metric",
                            "removedRelease": 1.35,
                            "firstSeen": "2026-12-05T10:02:00Z",
                            "lastSeen": "2026-12-05T10:02:00Z",
                            "observedAt": "2026-12-05T10:02:00Z",
                        }
                    ],
                },
            )
        ),
        "clusters[0].workloadCluster.apiUsage[0].removedRelease: expected a release",
    ),
    (
        "disruptionBlockers-on-unreachable",
        _fleet(
            _set(
                "clusters.0.workloadCluster",
                {"reachable": False, "reason": "x", "disruptionBlockers": []},
            )
        ),
        "unknown field(s) disruptionBlockers",
    ),
    ("not-utf8", b"clusters: [\xff\xfe]\n", "not UTF-8"),
    ("nul-bytes", b"clusters: []\x00\x00", "NUL characters"),
    ("empty", "", "snapshot is empty"),
    ("top-level-list", "- a\n- b\n", "expected a mapping"),
    ("two-documents", "clusters: []\n---\nclusters: []\n", "expected one YAML document"),
    ("python-tag", "clusters: !!python/object/apply:os.system [ls]\n", "unsupported tag"),
    ("unknown-alias", "clusters: *nothing\n", "unknown alias"),
    ("bad-syntax", "clusters: [\n  - name: a\n bad", "not valid YAML at line"),
    ("json-nan", '{"clusters": [], "network": [{"rttMs": NaN}]}', "NaN is not a number"),
]

# (id, strategy text, message fragment): run through ``plan --strategy``.
STRATEGIES: list[tuple[str, str, str]] = [
    ("approvel", _strategy(_set("stages.1.approvel", True)), "unknown field(s) approvel"),
    (
        "approval-string",
        _strategy(_set("stages.1.approval", "false")),
        "approval: must be true or false",
    ),
    (
        "maxConcurency",
        _strategy(_set("stages.0.maxConcurency", 3)),
        "unknown field(s) maxConcurency",
    ),
    (
        "window-durtion",
        _strategy(_set("maintenanceWindows.0.durtion", "4h")),
        "unknown field(s) durtion",
    ),
    (
        "observedUsage-ignore",
        _strategy(_set("observedUsage", "ignore")),
        "strategy.observedUsage: must be block or warn",
    ),
    (
        "unsatisfiableDisruptionBudgets-false",
        _strategy(_set("unsatisfiableDisruptionBudgets", False)),
        "strategy.unsatisfiableDisruptionBudgets: must be block or warn",
    ),
    ("apiVersion-v9", _strategy(_set("apiVersion", "v9")), "strategy.apiVersion"),
    ("kind-wrong", _strategy(_set("kind", "Strategy")), "strategy.kind"),
    ("duplicate-group", _strategy(_set("stages.1.groups.1.name", "eu-us")), "duplicate group name"),
    (
        "soak-huge",
        _strategy(_set("stages.0.soak", "99999999999999999999d")),
        "longer than the limit",
    ),
    ("soak-5000-digits", _strategy(_set("stages.0.soak", "9" * 5000 + "d")), "invalid duration"),
    (
        "canary-approvalAfter-yes",
        _strategy(_set("canary.approvalAfter", "yes")),
        "approvalAfter: must be true or false",
    ),
    ("maxConcurrency-huge", _strategy(_set("stages.0.maxConcurrency", 10**12)), "maxConcurrency"),
    (
        "group-unknown-field",
        _strategy(_set("stages.1.groups.0.selecter", {})),
        "unknown field(s) selecter",
    ),
    ("window-start", _strategy(_set("maintenanceWindows.0.start", "25:00")), "expected HH:MM"),
    ("stages-empty", _strategy(_set("stages", [])), "non-empty list"),
    ("alias-bomb", alias_bomb(), "aliases expand to more than"),
    ("duplicate-key", "stages: []\nstages: []\n", "duplicate key 'stages'"),
]

SNAPSHOT = "__snapshot__"  # stands for a good snapshot file in FLAG cases
# (id, argv, message fragment): flags on the offline commands and on calibrate (which must fail
# before it contacts Temporal: no server runs here).
FLAGS: list[tuple[str, list[str], str]] = [
    ("target-latest", ["plan", "-s", SNAPSHOT, "-t", "latest"], "invalid Kubernetes version"),
    (
        "target-1mb",
        ["plan", "-s", SNAPSHOT, "-t", "v" + "1" * 1_000_000],
        "invalid Kubernetes version",
    ),
    ("target-unavailable", ["plan", "-s", SNAPSHOT, "-t", "v1.36.0"], "not in availableVersions"),
    ("drift-target", ["drift", "-s", SNAPSHOT, "-t", "1.x"], "invalid Kubernetes version"),
    (
        "lifecycle-missing",
        ["drift", "-s", SNAPSHOT, "--lifecycle", "/nonexistent/lifecycle.yaml"],
        "lifecycle file '/nonexistent/lifecycle.yaml' does not exist",
    ),
    (
        "lifecycle-empty",
        ["check", "-s", SNAPSHOT, "-t", TARGET, "--lifecycle", "/dev/null"],
        "empty",
    ),
    (
        "target-newline",
        ["check", "-s", SNAPSHOT, "-t", TARGET + "\n"],
        "leading or trailing whitespace",
    ),
    (
        "selector-syntax",
        ["plan", "-s", SNAPSHOT, "-t", TARGET, "-l", "env in prod"],
        "invalid label selector",
    ),
    (
        "selector-huge",
        ["check", "-s", SNAPSHOT, "-t", TARGET, "-l", "a=" + "b" * 100_000],
        "longer than 4096",
    ),
    ("snapshot-missing", ["drift", "-s", "/nonexistent/fleet.yaml"], "does not exist"),
    ("snapshot-directory", ["drift", "-s", "/"], "is a directory"),
    ("snapshot-dev-zero", ["place", "-s", "/dev/zero"], "larger than the 64 MiB limit"),
    (
        "strategy-missing",
        ["plan", "-s", SNAPSHOT, "-t", TARGET, "--strategy", "/nonexistent.yaml"],
        "does not exist",
    ),
    ("calibrate-target", ["calibrate", "-t", "latest"], "invalid Kubernetes version"),
    ("calibrate-selector", ["calibrate", "-t", TARGET, "-l", "!"], "invalid label selector"),
    (
        "snapshot-and-live-flags",
        ["place", "-s", SNAPSHOT, "--kubeconfig", "/k", "-A"],
        "--snapshot reads a file; --kubeconfig, --all-namespaces are for the live fleet",
    ),
    ("namespace-and-all", ["drift", "-n", "fleet", "-A"], "exclude each other"),
    ("kubeconfig-missing", ["drift", "--kubeconfig", "/nonexistent/kc"], "is not a file"),
    ("live-selector", ["drift", "-l", "env in prod"], "invalid label selector"),
]
CALIBRATE_STRATEGIES = ["approvel", "approval-string", "soak-huge", "alias-bomb"]
USAGE: list[tuple[str, list[str]]] = [
    ("output-xml", ["drift", "-s", SNAPSHOT, "-o", "xml"]),
    ("snapshot-output-table", ["snapshot", "-o", "table"]),
    ("missing-target", ["plan", "-s", SNAPSHOT]),
    ("worker-placement-rounds-0", ["worker", "--placement-rounds", "0"]),
    ("worker-placement-rounds-17", ["worker", "--placement-rounds", "17"]),
]


def large_snapshot_json(clusters: int, workloads: int, duplicate_last: bool) -> str:
    """A valid fleet of realistic entries as compact JSON, built as text (fast, little memory).

    benchmarks/bad_inputs.py measures the CLI on it in a fresh process.
    """
    versions = FLEET["availableVersions"]
    envs = ("prod", "staging", "dev")
    cluster_rows = [
        f'{{"name":"cluster-{i:06d}","labels":{{"env":"{envs[i % 3]}","region":"r{i % 7}"}},'
        f'"controlPlane":{{"version":"{versions[i % 4]}","replicas":3}},'
        f'"machineDeployments":[{{"name":"md-0","version":"{versions[i % 4]}","replicas":3}},'
        f'{{"name":"md-1","version":"{versions[i % 4]}","replicas":2}}],"taints":[],'
        f'"capacity":{{"cpu":"64","memory":"256Gi"}},"allocated":{{"cpu":"20","memory":"64Gi"}}}}'
        for i in range(clusters)
    ]
    if duplicate_last:
        cluster_rows.append(cluster_rows[-1])
    workload_rows = (
        f'{{"name":"app-{i:07d}","namespace":"team-{i % 50}",'
        f'"apis":["apps/v1/Deployment","v1/Service"],"replicas":2,'
        f'"requests":{{"cpu":"500m","memory":"1Gi"}},'
        f'"placement":{{"clusterAffinity":{{"matchLabels":{{"env":"{envs[i % 3]}"}}}},'
        f'"tolerations":[],"clusters":["cluster-{i % clusters:06d}"]}}}}'
        for i in range(workloads)
    )
    return (
        f'{{"apiVersion":"calibrator.dev/v1alpha1","kind":"FleetSnapshot",'
        f'"availableVersions":{json.dumps(versions)},'
        f'"clusters":[{",".join(cluster_rows)}],"workloads":[{",".join(workload_rows)}]}}'
    )
