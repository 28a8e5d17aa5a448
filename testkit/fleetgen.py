"""Deterministic synthetic fleets for benchmarks and scale tests.

The shape follows what real CAPI fleets look like: prod/staging/dev over five regions, control
planes spread over v1.31-v1.35 (prod lagging), a few clusters tainted (upgrading, maintenance,
decommissioning), capacity unknown on a handful, RTTs measured from every cluster to one hub per
region. Workloads mostly pin an env (often a region too), some fall back between regions, some name
clusters; most run already somewhere; a few still use APIs that newer versions removed.

Built through ``snapshot_from_mapping`` so the generated fleet is exactly what the file format
would give (and validation runs on it too).
"""

from __future__ import annotations

import argparse
import json
import random
from typing import Any

import yaml

from orchestrator.domain.snapshot import FleetSnapshot
from orchestrator.domain.snapshot_load import snapshot_from_mapping

ENVS = (("prod", 0.4), ("staging", 0.3), ("dev", 0.3))
REGIONS = ("eu-west", "eu-central", "us-east", "us-west", "ap-south")
PROVIDER = {
    "eu-west": "aws",
    "eu-central": "gcp",
    "us-east": "aws",
    "us-west": "azure",
    "ap-south": "gcp",
}
# Base round trips between regions (ms); same-region links are a few ms.
_RTT = {
    ("eu-west", "eu-central"): 15,
    ("eu-west", "us-east"): 80,
    ("eu-west", "us-west"): 140,
    ("eu-west", "ap-south"): 120,
    ("eu-central", "us-east"): 95,
    ("eu-central", "us-west"): 150,
    ("eu-central", "ap-south"): 110,
    ("us-east", "us-west"): 65,
    ("us-east", "ap-south"): 190,
    ("us-west", "ap-south"): 170,
}
MINORS = (31, 32, 33, 34, 35)
PATCHES = {31: (12, 13), 32: (8, 9), 33: (4, 5), 34: (1, 2), 35: (0,)}
AVAILABLE = [f"v1.{m}.{p}" for m in MINORS for p in PATCHES[m]]
# Version mix per env: prod lags, dev leads.
VERSION_WEIGHTS = {
    "prod": (4, 4, 3, 1, 0.5),
    "staging": (1, 2, 4, 3, 1),
    "dev": (0.5, 1, 2, 4, 4),
}
BASE_APIS = ("apps/v1/Deployment", "v1/Service", "v1/ConfigMap")
EXTRA_APIS = (
    "networking.k8s.io/v1/Ingress",
    "batch/v1/CronJob",
    "autoscaling/v2/HorizontalPodAutoscaler",
    "policy/v1/PodDisruptionBudget",
    "apps/v1/StatefulSet",
)
REMOVED_APIS = (
    "flowcontrol.apiserver.k8s.io/v1beta3/FlowSchema",  # gone in 1.32
    "admissionregistration.k8s.io/v1alpha1/ValidatingAdmissionPolicy",  # gone in 1.32
    "resource.k8s.io/v1alpha3/ResourceClaim",  # gone in 1.34
    "storage.k8s.io/v1alpha1/VolumeAttributesClass",  # gone in 1.35
)
CPU = ("100m", "250m", "500m", "1", "2")
MEMORY = ("128Mi", "256Mi", "512Mi", "1Gi", "2Gi", "4Gi")
TEAMS = tuple(f"team-{c}" for c in "abcdefghij")


def _pick(rng: random.Random, weighted: tuple[tuple[str, float], ...]) -> str:
    return rng.choices([v for v, _ in weighted], [w for _, w in weighted])[0]


def _rtt(a: str, b: str) -> float:
    if a == b:
        return 3.0
    return float(_RTT.get((a, b)) or _RTT[(b, a)])


def _clusters(rng: random.Random, count: int) -> list[dict[str, Any]]:
    clusters: list[dict[str, Any]] = []
    for n in range(count):
        env = _pick(rng, ENVS)
        region = REGIONS[n % len(REGIONS)] if n < len(REGIONS) * 3 else rng.choice(REGIONS)
        minor = rng.choices(MINORS, VERSION_WEIGHTS[env])[0]
        version = f"v1.{minor}.{rng.choice(PATCHES[minor])}"
        worker_minor = max(MINORS[0], minor - rng.choice((0, 0, 0, 1, 2)))
        worker = f"v1.{worker_minor}.{PATCHES[worker_minor][0]}"
        cpu = rng.choice((32, 64, 96, 128, 192, 256))
        labels = {"env": env, "region": region, "provider": PROVIDER[region]}
        if env == "prod":
            labels["tier"] = rng.choice(("critical", "standard", "standard"))
        if env == "staging" and rng.random() < 0.05:
            labels["calibrator.dev/canary"] = "true"
        taints = []
        roll = rng.random()
        if roll < 0.03:
            taints.append({"key": "calibrator.dev/upgrading", "value": "", "effect": "NoSchedule"})
        elif roll < 0.05:
            taints.append(
                {"key": "example.com/maintenance", "value": "disk", "effect": "PreferNoSchedule"}
            )
        elif roll < 0.06:
            taints.append({"key": "example.com/decommission", "value": "", "effect": "NoExecute"})
        item: dict[str, Any] = {
            "name": f"{env}-{region}-{n:04d}",
            "labels": labels,
            "controlPlane": {"version": version, "replicas": 1 if env == "dev" else 3},
            "machineDeployments": [
                {"name": "md-0", "version": worker, "replicas": rng.randint(2, 20)}
            ],
            "taints": taints,
        }
        if rng.random() >= 0.02:
            used = rng.uniform(0.2, 0.6)
            item["capacity"] = {"cpu": str(cpu), "memory": f"{cpu * 4}Gi"}
            item["allocated"] = {
                "cpu": f"{int(cpu * used * 1000)}m",
                "memory": f"{int(cpu * 4 * used * 1024)}Mi",
            }
        clusters.append(item)
    return clusters


def _network(rng: random.Random, clusters: list[dict[str, Any]]) -> list[dict[str, Any]]:
    hubs: dict[str, str] = {}
    for c in clusters:
        hubs.setdefault(c["labels"]["region"], c["name"])
    links: list[dict[str, Any]] = []
    for c in clusters:
        region = c["labels"]["region"]
        if rng.random() < 0.03:
            continue  # never measured: latency-bound workloads must avoid it
        for hub_region, hub in sorted(hubs.items()):
            if hub == c["name"]:
                continue
            rtt = _rtt(region, hub_region) * rng.uniform(0.9, 1.3)
            links.append({"from": c["name"], "to": hub, "rttMs": round(rtt, 1)})
    return links


def _affinity(
    rng: random.Random, env: str, by_label: dict[tuple[str, str], list[str]]
) -> dict[str, Any]:
    roll = rng.random()
    if roll < 0.45:
        return {"clusterAffinity": {"matchLabels": {"env": env}}}
    if roll < 0.70:
        region = rng.choice(REGIONS)
        return {"clusterAffinity": {"matchLabels": {"env": env, "region": region}}}
    if roll < 0.82:
        first, second = rng.sample(REGIONS, 2)
        return {
            "clusterAffinities": [
                {"name": f"prefer-{first}", "matchLabels": {"env": env, "region": first}},
                {"name": f"fallback-{second}", "matchLabels": {"env": env, "region": second}},
            ]
        }
    if roll < 0.90:
        regions = sorted(rng.sample(REGIONS, 2))
        return {
            "clusterAffinity": {
                "matchLabels": {"env": env},
                "matchExpressions": [{"key": "region", "operator": "In", "values": regions}],
            }
        }
    if roll < 0.95 and env == "prod":
        return {"clusterAffinity": {"matchLabels": {"env": env, "tier": "critical"}}}
    pool = by_label[("env", env)]
    return {"clusterAffinity": {"clusterNames": sorted(rng.sample(pool, min(3, len(pool))))}}


def _workloads(
    rng: random.Random, count: int, clusters: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    by_label: dict[tuple[str, str], list[str]] = {}
    for c in clusters:
        for key, value in c["labels"].items():
            by_label.setdefault((key, value), []).append(c["name"])
    hubs = sorted({by_label[("region", r)][0] for r in REGIONS if ("region", r) in by_label})
    workloads: list[dict[str, Any]] = []
    for n in range(count):
        env = _pick(rng, ENVS)
        apis = list(BASE_APIS[: rng.randint(1, 3)])
        apis += rng.sample(EXTRA_APIS, rng.randint(0, 2))
        if rng.random() < 0.03:
            apis.append(rng.choice(REMOVED_APIS))
        replicas = rng.choice((1, 1, 2, 2, 3, 3, 4, 5, 6, 8, 10, 12, 16, 20))
        placement = _affinity(rng, env, by_label)
        roll = rng.random()
        if roll < 0.6:
            placement["maxClusters"] = rng.choice((1, 1, 2, 2, 3, 5))
        elif roll < 0.61:
            replicas = 1  # a per-cluster agent: one small copy on every matching cluster
        elif roll < 0.83:
            placement["replicaScheduling"] = {"type": "Dynamic"}
            if rng.random() < 0.5:
                placement["maxClusters"] = rng.choice((2, 3, 5))
        else:
            weights: list[dict[str, Any]]
            if rng.random() < 0.5:
                weights = []
            else:
                a, b = rng.sample(REGIONS, 2)
                weights = [
                    {"matchLabels": {"region": a}, "weight": 3, "minReplicas": 1},
                    {"matchLabels": {"region": b}, "weight": 1, "maxReplicas": 6},
                ]
            placement["replicaScheduling"] = {"type": "Weighted", "weights": weights}
            placement["maxClusters"] = rng.choice((2, 3, 4))
        if rng.random() < 0.06:
            placement["tolerations"] = [
                {"key": "calibrator.dev/upgrading", "operator": "Exists", "effect": "NoSchedule"}
            ]
        elif rng.random() < 0.01:
            placement["tolerations"] = [{"operator": "Exists"}]
        if rng.random() < 0.1:
            if rng.random() < 0.7:
                placement["maxLatency"] = {
                    "region": rng.choice(REGIONS),
                    "rttMs": rng.choice((20, 50, 100)),
                }
            else:
                placement["maxLatency"] = {
                    "cluster": rng.choice(hubs),
                    "rttMs": rng.choice((50, 100)),
                }
        if rng.random() < 0.8:
            pool = by_label.get(("env", env), [])
            if pool:
                placement["clusters"] = sorted(rng.sample(pool, min(len(pool), rng.randint(1, 3))))
        workloads.append(
            {
                "name": f"app-{n:05d}",
                "namespace": rng.choice(TEAMS),
                "apis": apis,
                "replicas": replicas,
                "requests": {"cpu": "50m", "memory": "64Mi"}
                if "maxClusters" not in placement and "replicaScheduling" not in placement
                else {"cpu": rng.choice(CPU), "memory": rng.choice(MEMORY)},
                "placement": placement,
            }
        )
    return workloads


def generate_fleet_mapping(clusters: int, workloads: int, seed: int = 0) -> dict[str, Any]:
    """The fleet in file form (what ``dump_snapshot`` would write)."""
    rng = random.Random(seed)
    cluster_items = _clusters(rng, clusters)
    return {
        "apiVersion": "calibrator.dev/v1alpha1",
        "kind": "FleetSnapshot",
        "availableVersions": AVAILABLE,
        "clusters": cluster_items,
        "workloads": _workloads(rng, workloads, cluster_items),
        "network": _network(rng, cluster_items),
    }


def generate_fleet(clusters: int, workloads: int, seed: int = 0) -> FleetSnapshot:
    """A validated, deterministic synthetic fleet: same arguments, same snapshot."""
    return snapshot_from_mapping(generate_fleet_mapping(clusters, workloads, seed))


def write_fleet(path: str, clusters: int, workloads: int, seed: int = 0) -> int:
    """Write the fleet as a FleetSnapshot file, JSON or YAML by the file's suffix; its size.

    YAML goes through libyaml's emitter when PyYAML has it (the pure-Python one takes minutes
    at 10,000 clusters); either way it is what ``dump_snapshot`` would write.
    """
    mapping = generate_fleet_mapping(clusters, workloads, seed)
    if path.endswith(".json"):
        text = json.dumps(mapping, separators=(",", ":"))
    else:
        dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
        text = yaml.dump(mapping, Dumper=dumper, sort_keys=False)
    with open(path, "w", encoding="utf-8") as out:
        out.write(text)
    return len(text.encode())


def main(argv: list[str] | None = None) -> int:
    """``python -m testkit.fleetgen CLUSTERS WORKLOADS FILE.{json,yaml} [--seed N]``."""
    parser = argparse.ArgumentParser(description="Write a synthetic FleetSnapshot file.")
    parser.add_argument("clusters", type=int)
    parser.add_argument("workloads", type=int)
    parser.add_argument("path", help="output file; .json writes JSON, anything else YAML")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    size = write_fleet(args.path, args.clusters, args.workloads, args.seed)
    print(f"{args.path}: {size:,} bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
