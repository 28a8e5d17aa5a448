"""How many CAPD docker clusters this machine holds: add clusters step by step until one fails.

Usage (inside a network namespace of its own, after ``calibrator env up --provider docker``)::

    python3 -m benchmarks.bench_capd_capacity --state-dir DIR --steps 1,2,4,6,8 \\
        [--step-timeout 900] [--deadline EPOCH] --json OUT

Each step creates the clusters that bring the total to the step's count (all applied at once,
1 control plane + 1 worker each, from capi-templates/docker as ``bench_capd_docker`` does), then
polls every 2 s until every cluster of the step holds every milestone of
``bench_capd_docker.observe`` (both Nodes Ready, Cluster Available, ...) or ``--step-timeout``
passes. After each step it records: seconds to Available per new cluster, the host's
MemAvailable and load averages, and ``docker stats`` (memory without page cache, CPU) of every
container. It stops at the first step that does not complete, with what was missing, the CAPI
conditions of the clusters that failed and the states of their containers, or before a step
that would start after ``--deadline``. Earlier clusters keep running (they are the load);
``calibrator env down`` removes them all.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.bench_capd_docker import CNI_LABEL, NS, observe, prepare
from orchestrator.kube import capi
from orchestrator.kube.client import apply_all
from orchestrator.kube.templates import cluster_objects
from orchestrator.localplane.dockerapi import api
from orchestrator.localplane.dockerengine import DockerEngine
from orchestrator.localplane.plane import LocalPlane


def host() -> dict[str, Any]:
    """MemAvailable (MiB) and load averages of the host now."""
    mem = {
        line.split(":")[0]: int(line.split()[1])
        for line in Path("/proc/meminfo").read_text().splitlines()
    }
    return {
        "memAvailableMiB": mem["MemAvailable"] // 1024,
        "memTotalMiB": mem["MemTotal"] // 1024,
        "load": list(os.getloadavg()),
    }


def container_stats(engine: DockerEngine) -> dict[str, dict[str, Any]]:
    """Per container (the Engine API's one-shot stats, cgroup v1 here): ``memMiB`` as ``docker
    stats`` shows it (usage minus inactive page cache), ``rssMiB`` (anonymous memory of the whole
    container cgroup tree), ``cacheMiB``, ``cpuPct`` (% of one core over the engine's ~1 s sample)
    and the container's state."""
    code, body = api(engine.socket, "GET", "/containers/json?all=1", timeout=60)
    if code != 200 or not isinstance(body, list):
        return {}
    out: dict[str, dict[str, Any]] = {}
    for c in body:
        name = str(c["Names"][0]).lstrip("/")
        row: dict[str, Any] = {"state": c.get("State")}
        if c.get("State") == "running":
            code, st = api(engine.socket, "GET", f"/containers/{c['Id']}/stats?stream=0", 60)
            if code == 200 and isinstance(st, dict):
                mem = st.get("memory_stats") or {}
                stats = mem.get("stats") or {}
                cpu = st["cpu_stats"]["cpu_usage"]["total_usage"] - (
                    st["precpu_stats"].get("cpu_usage") or {}
                ).get("total_usage", 0)
                system = st["cpu_stats"].get("system_cpu_usage", 0) - st["precpu_stats"].get(
                    "system_cpu_usage", 0
                )
                cores = st["cpu_stats"].get("online_cpus") or 1
                inactive = stats.get("total_inactive_file", stats.get("inactive_file", 0))
                mib = 2**20
                row |= {
                    "memMiB": round((mem.get("usage", 0) - inactive) / mib, 1),
                    "rssMiB": round(stats.get("total_rss", stats.get("rss", 0)) / mib, 1),
                    "cacheMiB": round(stats.get("total_cache", stats.get("cache", 0)) / mib, 1),
                    "cpuPct": round(100.0 * cpu / system * cores, 1) if system > 0 else 0.0,
                }
        out[name] = row
    return out


def evidence(dyn: Any, engine: DockerEngine, name: str) -> dict[str, Any]:
    """The Cluster's false conditions, its Machines' phases and its containers' states."""
    doc: dict[str, Any] = {}
    try:
        cluster = (
            dyn.resources.get(api_version=capi.CLUSTER[0], kind=capi.CLUSTER[1])
            .get(name=name, namespace=NS)
            .to_dict()
        )
        doc["conditions"] = [
            {k: c.get(k) for k in ("type", "status", "reason", "message")}
            for c in (cluster.get("status") or {}).get("conditions") or []
            if c.get("status") != "True"
        ]
        ms = dyn.resources.get(api_version=capi.MACHINE[0], kind=capi.MACHINE[1]).get(
            namespace=NS, label_selector=f"{capi.CLUSTER_NAME_LABEL}={name}"
        )
        doc["machines"] = {
            m["metadata"]["name"]: (m.get("status") or {}).get("phase")
            for m in (i.to_dict() for i in ms.items)
        }
    except Exception as err:
        doc["error"] = f"{type(err).__name__}: {err}"
    code, body = api(engine.socket, "GET", "/containers/json?all=1", timeout=60)
    if code == 200 and isinstance(body, list):
        doc["containers"] = {
            str(c["Names"][0]).lstrip("/"): c.get("Status")
            for c in body
            if str(c["Names"][0]).lstrip("/").startswith(name)
        }
    return doc


def run(
    plane: LocalPlane, steps: list[int], step_timeout: float, deadline: float | None, version: str
) -> dict[str, Any]:
    engine, mgmt, dyn = prepare(plane)
    doc: dict[str, Any] = {"version": version, "steps": [], "idle": host()}
    total = 0
    for count in steps:
        if deadline is not None and time.time() > deadline:
            doc["stopped"] = f"deadline reached before the step to {count} clusters"
            break
        new = [f"cap{i + 1}" for i in range(total, count)]
        began = time.monotonic()
        for name in new:
            apply_all(dyn, cluster_objects(name, NS, version, backend="docker", labels=CNI_LABEL))
        print(f"[capacity] step to {count}: applied {', '.join(new)}", file=sys.stderr)
        available: dict[str, float] = {}
        last: dict[str, dict[str, bool]] = {}
        peak_load = 0.0
        min_mem = host()["memAvailableMiB"]
        while time.monotonic() - began < step_timeout and len(available) < len(new):
            for name in new:
                if name in available:
                    continue
                try:
                    last[name] = observe(dyn, mgmt, engine.socket, name)
                except Exception as err:
                    print(f"[capacity] poll {name}: {err}", file=sys.stderr)
                    continue
                if all(last[name].values()):
                    available[name] = round(time.monotonic() - began, 1)
                    print(f"[capacity] {available[name]:7.1f}s {name} ready", file=sys.stderr)
            now = host()
            peak_load = max(peak_load, now["load"][0])
            min_mem = min(min_mem, now["memAvailableMiB"])
            time.sleep(2.0)
        total = count
        # Every cluster made so far, still healthy? (earlier ones may break under the new load)
        older = [f"cap{i + 1}" for i in range(count) if f"cap{i + 1}" not in new]
        broken_older = []
        for name in older:
            try:
                if not all(observe(dyn, mgmt, engine.socket, name).values()):
                    broken_older.append(name)
            except Exception:
                broken_older.append(name)
        row: dict[str, Any] = {
            "clusters": count,
            "new": new,
            "secondsToAvailable": available,
            "stepSeconds": round(time.monotonic() - began, 1),
            "peakLoad1": round(peak_load, 2),
            "minMemAvailableMiB": min_mem,
            "host": host(),
            "containers": container_stats(engine),
            "olderNotReady": broken_older,
        }
        failed = [n for n in new if n not in available]
        if failed or broken_older:
            row["failed"] = {
                n: {
                    "missing": sorted(k for k, v in last.get(n, {}).items() if not v),
                    **evidence(dyn, engine, n),
                }
                for n in [*failed, *broken_older]
            }
        doc["steps"].append(row)
        print(f"[capacity] {json.dumps({k: row[k] for k in row if k != 'containers'})}",
              file=sys.stderr)  # fmt: skip
        if failed or broken_older:
            doc["stopped"] = f"step to {count} clusters failed: {sorted(row['failed'])}"
            break
    return doc


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m benchmarks.bench_capd_capacity")
    parser.add_argument("--state-dir", type=Path, required=True)
    parser.add_argument("--version", default="v1.34.12")
    parser.add_argument("--steps", default="1,2,4,6,8,10,12")
    parser.add_argument("--step-timeout", type=float, default=900.0)
    parser.add_argument("--deadline", type=float, default=None, help="epoch seconds")
    parser.add_argument("--json", type=Path, required=True)
    args = parser.parse_args(argv)
    steps = [int(s) for s in args.steps.split(",")]
    doc = run(LocalPlane(args.state_dir), steps, args.step_timeout, args.deadline, args.version)
    args.json.write_text(json.dumps(doc, indent=2) + "\n")
    print(json.dumps({k: v for k, v in doc.items() if k != "steps"}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
