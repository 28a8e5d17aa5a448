"""What observing workload clusters adds to the live inventory at fleet scale (issue 27 §4).

Usage (root, in a network namespace of its own: it starts a local plane unless ``--kubeconfig``
names a running one)::

    unshare -n tools/netns-run.sh "$PWD" nice -n 10 \
        python3 -m benchmarks.bench_observation --sizes 12,100 --repeats 3 --instances 3

What is measured: ``inventory.read_fleet`` with the CLI's probe (``cli/live.py``:
``workload.probe`` on a hardened client of the management cluster), once as it is ("observe":
discovery, Nodes, then ``apiusage.observe``: every apiserver's ``/metrics``, the PDB LIST, the
catalog kinds' LISTs) and once with ``workload.observe`` replaced, in that child process only,
by an empty observation ("reach": what the probe cost before issue 27). Production code is not
changed. Each run is a fresh child process (so CPU seconds and peak RSS are its own), runs are
interleaved A/B (AB, BA, AB, ...), and every figure is a median.

The workload clusters are real kube-apiservers: the plane's own (v1.35, serving the deprecated
``storage.k8s.io/v1beta1``) and ``--instances - 1`` more kube-apiserver processes started here
with the plane's own command line (its binary, flags, certificates and etcd) on other ports, so
they serve the same objects. kube-apiserver mirror pods in ``kube-system`` carry kubeadm's
advertise annotation for each of them, so every look reads ``/metrics`` of every instance, as
on a kubeadm control plane of ``--instances`` machines; cluster i's ``<cluster>-kubeconfig``
Secret points at instance i mod ``--instances`` (its "load balancer"). The clusters are CAPI
Cluster + KubeadmControlPlane + MachineDeployment objects with ``spec.paused: true`` (CAPI never
provisions them; the inventory maps them as any other). Before measuring, a VolumeAttributesClass
is applied through ``storage.k8s.io/v1beta1`` by kubectl and read back through it on every
instance, and a few PDBs (one allowing no eviction) are created, so the metric, PDB and
stored-object paths all find something.

What this means: the client side (the CLI or worker process: its CPU, wire bytes, requests,
memory) pays per cluster what it would pay against N separate clusters of that many
control-plane machines; the server side is a worst case (a few apiservers answer every look).

Counted in the child: requests by kind (one hook on ``ApiClient.call_api``, the path every
request of the kubernetes client takes, as ``client.observe_requests`` uses per client), bytes
received over TLS after decryption (HTTP headers and bodies as sent: ``/metrics`` gzip-compressed,
JSON uncompressed; TLS handshakes not included) per kind, new TLS connections, CPU seconds of the
process (all threads), peak RSS. Counted by the parent: the apiservers' CPU seconds per run.
Prints markdown tables and writes JSON (``--json``).
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import os
import resource
import shutil
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

NS = "obsbench"
VAC_NAME = "obsbench-gold"
VAC_MANIFEST = f"""
apiVersion: storage.k8s.io/v1beta1
kind: VolumeAttributesClass
metadata:
  name: {VAC_NAME}
driverName: csi.example.com
parameters:
  iops: "3000"
"""
READS = 5  # GETs through v1beta1 per instance, besides kubectl's own
MIRROR = "obsbench-kube-apiserver"
PDBS = (("frozen", 0), ("loose", 1), ("spare", 2))
APISERVER_TTL = 3600  # extra apiservers stop by themselves after this many seconds


# ----------------------------------------------------------------------------- child: one run


class Meter:
    """Requests, bytes received and connections of one process, by kind of request."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests: Counter[str] = Counter()
        self.received: Counter[str] = Counter()
        self.sent: Counter[str] = Counter()
        self.connections = 0
        self.local = threading.local()
        self.management: object = None

    def kind(self, api: object, method: str, url: str) -> str:
        path = urlsplit(url).path
        if api is self.management:
            return "mgmt GET Secret" if "/secrets/" in path else "mgmt inventory"
        parts = path.strip("/").split("/")
        if path == "/metrics":
            return "GET /metrics"
        if path in ("/api", "/apis"):
            return "discovery /api, /apis"
        if path == "/version":
            return "GET /version"
        if path == "/api/v1/nodes":
            return "LIST Nodes"
        if path == "/api/v1/namespaces/kube-system/pods":
            return "LIST kube-apiserver pods"
        if path == "/apis/policy/v1/poddisruptionbudgets":
            return "LIST PDBs"
        if (parts[0] == "apis" and len(parts) == 3) or (parts[0] == "api" and len(parts) == 2):
            return "discovery of a group/version"
        return f"{method} stored objects"

    def install(self) -> None:
        """Hook the kubernetes client, TLS reads and writes, and urllib3's connects."""
        import urllib3.connection  # noqa: PLC0415
        from kubernetes.client import ApiClient  # noqa: PLC0415

        meter = self
        call_api = ApiClient.call_api

        def counted_call(api: Any, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
            kind = meter.kind(api, method, url)
            meter.local.kind = kind
            with meter.lock:
                meter.requests[kind] += 1
            return call_api(api, method, url, *args, **kwargs)

        recv_into = ssl.SSLSocket.recv_into

        def counted_recv(sock: Any, buffer: Any, nbytes: int = 0, flags: int = 0) -> int:
            n: int = recv_into(sock, buffer, nbytes, flags)
            with meter.lock:
                meter.received[getattr(meter.local, "kind", "other")] += n
            return n

        sendall = ssl.SSLSocket.sendall

        def counted_send(sock: Any, data: Any, flags: int = 0) -> None:
            with meter.lock:
                meter.sent[getattr(meter.local, "kind", "other")] += len(data)
            sendall(sock, data, flags)

        connect = urllib3.connection.HTTPSConnection.connect

        def counted_connect(conn: Any) -> None:
            with meter.lock:
                meter.connections += 1
            connect(conn)

        setattr(ApiClient, "call_api", counted_call)  # noqa: B010 (a class-wide hook)
        setattr(ssl.SSLSocket, "recv_into", counted_recv)  # noqa: B010
        setattr(ssl.SSLSocket, "sendall", counted_send)  # noqa: B010
        setattr(urllib3.connection.HTTPSConnection, "connect", counted_connect)  # noqa: B010


def rusage() -> tuple[float, int]:
    """(CPU seconds of this process, all threads; peak RSS in KiB)."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime, r.ru_maxrss


def rss_now() -> float:
    """VmRSS of this process in MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def one_run(kubeconfig: str, namespace: str, variant: str) -> dict[str, Any]:
    """``read_fleet`` with the CLI's probe, observing or not; what it cost and what it saw."""
    import functools  # noqa: PLC0415

    from orchestrator.kube import workload  # noqa: PLC0415
    from orchestrator.kube.apiusage import Observation  # noqa: PLC0415
    from orchestrator.kube.client import api_client, dynamic, harden  # noqa: PLC0415
    from orchestrator.kube.inventory import read_fleet  # noqa: PLC0415

    if variant == "reach":
        # The probe as before issue 27: ``workload.probe`` looks ``observe`` up at each call.
        setattr(workload, "observe", lambda *_a, **_k: Observation((), (), ""))  # noqa: B010
    meter = Meter()
    meter.install()
    api = harden(api_client(kubeconfig))  # as the CLI does (cli/live.py)
    meter.management = api
    cpu0, rss0 = rusage()
    rss_start = rss_now()
    started = time.monotonic()
    read = read_fleet(
        dynamic(api),
        namespace,
        probe=functools.partial(workload.probe, api),
        require_workloads=False,
    )
    wall = time.monotonic() - started
    cpu1, rss1 = rusage()
    rss_end = rss_now()
    api.close()  # type: ignore[no-untyped-call]
    statuses = [c.workload_cluster for c in read.snapshot.clusters]
    return {
        "variant": variant,
        "clusters": len(statuses),
        "reachable": sum(1 for s in statuses if s is not None and s.reachable),
        "with_metric_usage": sum(
            1 for s in statuses if s and any(u.source == "metric" for u in s.api_usage)
        ),
        "with_stored_usage": sum(
            1 for s in statuses if s and any(u.source != "metric" for u in s.api_usage)
        ),
        "with_blockers": sum(1 for s in statuses if s and s.disruption_blockers),
        "partial": sorted({s.observation_partial for s in statuses if s and s.observation_partial}),
        "unreachable": sorted({s.reason for s in statuses if s and not s.reachable})[:3],
        "wall_s": wall,
        "cpu_s": cpu1 - cpu0,
        "rss_before_mib": rss0 / 1024,
        "peak_rss_mib": rss1 / 1024,
        "rss_growth_mib": rss_end - rss_start,
        "requests": dict(meter.requests),
        "received": dict(meter.received),
        "sent": dict(meter.sent),
        "connections": meter.connections,
    }


# --------------------------------------------------------------------------- parent: the setup


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process (all threads), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_apiservers(pid: int, count: int, work: Path) -> list[tuple[subprocess.Popen[bytes], int]]:
    """``count`` more kube-apiservers with the command line of process ``pid`` on new ports."""
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().rstrip(b"\0").decode().split("\0")
    started = []
    for i in range(count):
        port = free_port()
        replaced = {
            "--secure-port=": f"--secure-port={port}",
            "--cert-dir=": f"--cert-dir={work / f'apiserver-{i}'}",
        }
        args = [
            next((new for flag, new in replaced.items() if arg.startswith(flag)), arg)
            for arg in argv
        ]
        log = (work / f"apiserver-{i}.log").open("wb")
        # ``timeout``: the process stops by itself even if this benchmark is killed.
        proc = subprocess.Popen(["timeout", str(APISERVER_TTL), *args], stdout=log, stderr=log)
        started.append((proc, port))
    return started


def served_by(pid: int) -> int:
    """The kube-apiserver that ``timeout`` (process ``pid``) runs: its one child."""
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    if len(children) != 1:
        raise RuntimeError(f"timeout {pid} runs {len(children)} processes, not one")
    return int(children[0])


def wait_ready(ca: str, port: int, timeout: float = 180.0) -> None:
    """Until https://127.0.0.1:port/readyz answers 200 (unauthenticated readyz is allowed)."""
    import urllib.request  # noqa: PLC0415

    context = ssl.create_default_context(cafile=ca)
    end = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(
                f"https://127.0.0.1:{port}/readyz", context=context, timeout=5
            ) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        if time.monotonic() > end:
            raise TimeoutError(f"kube-apiserver on port {port} not ready in {timeout:.0f}s")
        time.sleep(1)


def kubeconfig_for_port(text: str, port: int) -> str:
    config = yaml.safe_load(text)
    for entry in config["clusters"]:
        entry["cluster"]["server"] = f"https://127.0.0.1:{port}"
    return str(yaml.safe_dump(config))


def kubectl(kubeconfig: Path, *args: str, stdin: str = "") -> None:
    done = subprocess.run(
        ["kubectl", "--kubeconfig", str(kubeconfig), *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"kubectl {' '.join(args)}: {done.stderr.strip()}")


def setup(kubeconfig: Path, ports: list[int], sizes: list[int], work: Path) -> dict[str, str]:
    """Deprecated-API use on every instance, PDBs, mirror pods, and the clusters; size -> ns."""
    from kubernetes import client  # noqa: PLC0415

    from orchestrator.kube.apiusage import ADVERTISE_ANNOTATION  # noqa: PLC0415
    from orchestrator.kube.client import api_client, apply_all, dynamic  # noqa: PLC0415
    from orchestrator.kube.templates import cluster_objects  # noqa: PLC0415

    text = kubeconfig.read_text()
    configs = []
    for port in ports:
        path = work / f"kubeconfig-{port}"
        path.write_text(kubeconfig_for_port(text, port))
        configs.append(path)
    kubectl(configs[0], "apply", "-f", "-", stdin=VAC_MANIFEST)
    for path in configs:  # every instance serves the deprecated API to a client
        for _ in range(READS):
            kubectl(path, "get", f"volumeattributesclasses.v1beta1.storage.k8s.io/{VAC_NAME}")
    mgmt = api_client(kubeconfig)
    core = client.CoreV1Api(mgmt)
    policy = client.PolicyV1Api(mgmt)
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=NS)))
    for name, max_unavailable in PDBS:
        policy.create_namespaced_pod_disruption_budget(
            NS,
            client.V1PodDisruptionBudget(
                metadata=client.V1ObjectMeta(name=name),
                spec=client.V1PodDisruptionBudgetSpec(
                    max_unavailable=max_unavailable,
                    selector=client.V1LabelSelector(match_labels={"app": name}),
                ),
            ),
        )
        # No kube-controller-manager runs: write the status as its disruption controller would.
        policy.patch_namespaced_pod_disruption_budget_status(
            name,
            NS,
            {
                "status": {
                    "expectedPods": 3,
                    "currentHealthy": 3,
                    "desiredHealthy": 3 - max_unavailable,
                    "disruptionsAllowed": max_unavailable,
                    "observedGeneration": 1,
                }
            },
        )
    if len(ports) > 1:
        for i, port in enumerate(ports):
            core.create_namespaced_pod(
                "kube-system",
                client.V1Pod(
                    metadata=client.V1ObjectMeta(
                        name=f"{MIRROR}-{i}",
                        labels={"component": "kube-apiserver", "tier": "control-plane"},
                        annotations={ADVERTISE_ANNOTATION: f"127.0.0.1:{port}"},
                    ),
                    spec=client.V1PodSpec(
                        containers=[client.V1Container(name="kube-apiserver", image="unused")]
                    ),
                ),
            )
    dyn = dynamic(mgmt)
    namespaces = {}
    for size in sizes:
        ns = f"{NS}-{size}"
        namespaces[str(size)] = ns
        core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=ns)))
        for i in range(size):
            name = f"c{size}-{i:03d}"
            objects = cluster_objects(name, ns, "v1.34.0", topology=False)
            for obj in objects:
                if obj["kind"] == "Cluster":
                    obj["spec"]["paused"] = True
            apply_all(dyn, objects)
            value = configs[i % len(configs)].read_text()
            core.create_namespaced_secret(
                ns,
                client.V1Secret(
                    metadata=client.V1ObjectMeta(name=f"{name}-kubeconfig"),
                    data={"value": base64.b64encode(value.encode()).decode()},
                ),
            )
    mgmt.close()  # type: ignore[no-untyped-call]
    return namespaces


# ------------------------------------------------------------------------------ parent: runs


def run_child(kubeconfig: Path, namespace: str, variant: str, pids: list[int]) -> dict[str, Any]:
    servers0 = sum(cpu_seconds(p) for p in pids)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.bench_observation",
            "--one",
            variant,
            "--kubeconfig",
            str(kubeconfig),
            "--namespace",
            namespace,
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"run {variant} {namespace} failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout)
    result["apiserver_cpu_s"] = sum(cpu_seconds(p) for p in pids) - servers0
    return result


def check(result: dict[str, Any]) -> None:
    """A run measured only what it claims: every cluster reached and, observing, seen whole."""
    n = result["clusters"]
    fine = result["reachable"] == n and not result["partial"]
    if result["variant"] == "observe":
        fine = fine and n == result["with_metric_usage"] == result["with_stored_usage"]
        fine = fine and n == result["with_blockers"]
    if not fine:
        raise RuntimeError(f"run did not see the whole fleet: {json.dumps(result)[:2000]}")


def median(runs: list[dict[str, Any]], get: Callable[[dict[str, Any]], float]) -> float:
    return float(statistics.median([get(r) for r in runs]))


def kind_median(runs: list[dict[str, Any]], field: str, kind: str) -> float:
    return float(statistics.median([r[field].get(kind, 0) for r in runs]))


def summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians of one variant at one size (requests and bytes: the same every run, medians)."""
    kinds = sorted(
        {k for r in runs for k in r["requests"]} | {k for r in runs for k in r["received"]}
    )
    return {
        "runs": len(runs),
        "clusters": runs[0]["clusters"],
        "wall_s": median(runs, lambda r: r["wall_s"]),
        "wall_all_s": [round(r["wall_s"], 3) for r in runs],
        "cpu_s": median(runs, lambda r: r["cpu_s"]),
        "apiserver_cpu_s": median(runs, lambda r: r["apiserver_cpu_s"]),
        "peak_rss_mib": median(runs, lambda r: r["peak_rss_mib"]),
        "rss_before_mib": median(runs, lambda r: r["rss_before_mib"]),
        "rss_growth_mib": median(runs, lambda r: r["rss_growth_mib"]),
        "requests": sum(kind_median(runs, "requests", k) for k in kinds),
        "received_bytes": median(runs, lambda r: sum(r["received"].values())),
        "sent_bytes": median(runs, lambda r: sum(r["sent"].values())),
        "connections": median(runs, lambda r: r["connections"]),
        "by_kind": {
            k: {
                "requests": kind_median(runs, "requests", k),
                "received_bytes": kind_median(runs, "received", k),
            }
            for k in kinds
        },
        "checks": {
            key: sorted({json.dumps(r[key]) for r in runs})
            for key in (
                "reachable",
                "with_metric_usage",
                "with_stored_usage",
                "with_blockers",
                "partial",
                "unreachable",
            )
        },
    }


def table(results: dict[str, dict[str, dict[str, Any]]]) -> str:
    rows = [
        "| clusters | probe | wall s | CLI CPU s | apiservers' CPU s | requests | KB received "
        "| TLS connections | peak RSS MiB | RSS growth MiB |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for size, by_variant in results.items():
        for variant in ("reach", "observe"):
            s = by_variant[variant]
            rows.append(
                f"| {size} | {variant} | {s['wall_s']:.2f} | {s['cpu_s']:.2f} | "
                f"{s['apiserver_cpu_s']:.2f} | {s['requests']:.0f} | "
                f"{s['received_bytes'] / 1000:,.0f} | {s['connections']:.0f} | "
                f"{s['peak_rss_mib']:.0f} | {s['rss_growth_mib']:.1f} |"
            )
        a, b = by_variant["observe"], by_variant["reach"]
        n = int(size)
        rows.append(
            f"| {size} | **extra per cluster** | {(a['wall_s'] - b['wall_s']) / n:.3f} | "
            f"{(a['cpu_s'] - b['cpu_s']) / n:.3f} | "
            f"{(a['apiserver_cpu_s'] - b['apiserver_cpu_s']) / n:.3f} | "
            f"{(a['requests'] - b['requests']) / n:.1f} | "
            f"{(a['received_bytes'] - b['received_bytes']) / n / 1000:,.1f} | "
            f"{(a['connections'] - b['connections']) / n:.1f} | "
            f"{a['peak_rss_mib'] - b['peak_rss_mib']:+.0f} (whole) | "
            f"{a['rss_growth_mib'] - b['rss_growth_mib']:+.1f} (whole) |"
        )
    kinds = sorted({k for v in results.values() for s in v.values() for k in s["by_kind"]})
    rows += [
        "",
        "| clusters | probe | " + " | ".join(kinds) + " |",
        "|---:|---|" + "---:|" * len(kinds),
    ]
    for size, by_variant in results.items():
        for variant in ("reach", "observe"):
            by_kind = by_variant[variant]["by_kind"]
            cells = [
                f"{by_kind[k]['requests']:.0f} ({by_kind[k]['received_bytes'] / 1000:,.0f} KB)"
                if k in by_kind
                else "0"
                for k in kinds
            ]
            rows.append(f"| {size} | {variant} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


@contextlib.contextmanager
def plane_for(kubeconfig: str | None) -> Iterator[tuple[Path, int]]:
    """(kubeconfig, kube-apiserver pid) of the given plane, or of one started here and stopped."""
    from orchestrator.localplane.plane import LocalPlane  # noqa: PLC0415

    if kubeconfig:
        state = Path(kubeconfig).parent
        plane = LocalPlane(state)
        pid = next(c.pid for c in plane.status().components if c.name == "kube-apiserver")
        yield Path(kubeconfig), int(pid or 0)
        return
    with tempfile.TemporaryDirectory() as tmp:
        plane = LocalPlane(Path(tmp))
        plane.up(timeout=300, ttl_seconds=3600)
        try:
            pid = next(c.pid for c in plane.status().components if c.name == "kube-apiserver")
            yield plane.kubeconfig, int(pid or 0)
        finally:
            plane.down(purge=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="12,100", help="clusters per fleet, comma-separated")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each variant per size")
    parser.add_argument(
        "--instances", type=int, default=3, help="kube-apiservers (the plane's and more)"
    )
    parser.add_argument("--kubeconfig", help="a running local plane's kubeconfig (else start one)")
    parser.add_argument("--json", type=Path, help="write every run and the medians here")
    parser.add_argument("--one", choices=("observe", "reach"), help=argparse.SUPPRESS)
    parser.add_argument("--namespace", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(one_run(args.kubeconfig, args.namespace, args.one)))
        return 0
    sizes = [int(s) for s in args.sizes.split(",")]
    if not sizes or min(sizes) < 1 or args.repeats < 1 or not 1 <= args.instances <= 5:
        parser.error("--sizes > 0, --repeats >= 1, --instances 1..5")
    if shutil.which("kubectl") is None:
        parser.error("kubectl is needed (it makes the deprecated-API requests)")
    with plane_for(args.kubeconfig) as (kubeconfig, pid), tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        base = int(
            yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]["server"].rsplit(
                ":", 1
            )[1]
        )
        extra = start_apiservers(pid, args.instances - 1, work)
        try:
            ca = str(kubeconfig.parent / "pki" / "ca.crt")
            for _, port in extra:
                wait_ready(ca, port)
            ports = [base] + [port for _, port in extra]
            pids = [pid] + [served_by(p.pid) for p, _ in extra]
            began = time.monotonic()
            namespaces = setup(kubeconfig, ports, sizes, work)
            print(
                f"setup: {time.monotonic() - began:.0f}s, instances on ports {ports}",
                file=sys.stderr,
            )
            runs: dict[str, dict[str, list[dict[str, Any]]]] = {}
            for size in sizes:
                ns = namespaces[str(size)]
                runs[str(size)] = {"observe": [], "reach": []}
                run_child(kubeconfig, ns, "reach", pids)  # warm-up (the apiservers' caches)
                for r in range(args.repeats):
                    order = ("observe", "reach") if r % 2 == 0 else ("reach", "observe")
                    for variant in order:
                        result = run_child(kubeconfig, ns, variant, pids)
                        print(
                            f"{size} {variant}: {result['wall_s']:.2f}s wall, "
                            f"{result['cpu_s']:.2f}s CPU, load {os.getloadavg()[0]:.1f}",
                            file=sys.stderr,
                        )
                        result["load1"] = os.getloadavg()[0]
                        check(result)
                        runs[str(size)][variant].append(result)
        finally:
            for proc, _ in extra:
                proc.terminate()
            for proc, _ in extra:
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
    results = {size: {v: summary(rs) for v, rs in by.items()} for size, by in runs.items()}
    print(table(results))
    if args.json:
        args.json.write_text(json.dumps({"results": results, "runs": runs}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
