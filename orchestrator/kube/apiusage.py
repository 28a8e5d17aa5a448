"""What one workload cluster is seen doing: deprecated APIs in use, PDBs that block drains.

``observe`` reads, through the workload cluster's kubeconfig (CAPI's ``<cluster>-kubeconfig``
secret) and within one shared deadline:

1. **Every control-plane instance's metrics.** A load balancer in front of the apiservers sends
   one GET to one of them, and each apiserver counts only the requests it served, so the
   kube-apiserver mirror pods in ``kube-system`` (label ``component=kube-apiserver``) are LISTed
   and each one's kubeadm annotation ``kubeadm.kubernetes.io/kube-apiserver.advertise-address.
   endpoint`` (``IP:port``) is asked for ``/metrics`` directly, with the kubeconfig's own
   credentials and CA: kubeadm's serving certificate has the advertise IP in its SANs, so TLS is
   verified as it is through the load balancer (never switched off). With no such pod (not a
   kubeadm control plane, or a bare apiserver such as the local plane's) the kubeconfig's server
   is read as the one instance. An instance that does not answer makes the look partial, named.
   The body is streamed and read line by line (``orchestrator.domain.promtext``). At most
   ``MAX_INSTANCES`` pods are read (a control plane has 1, 3 or 5). Only deprecated APIs with
   a removal release are recorded: one with none (``removed_release`` "": v1 Endpoints since
   1.33, a deprecated CRD version) is removed by no upgrade.
2. **PodDisruptionBudgets that allow no eviction** (``orchestrator.domain.disruption``), from a
   paginated LIST of policy/v1 PDBs in every namespace (at most ``MAX_PDBS``, else partial); the
   first ``MAX_BLOCKERS`` by namespace and name are kept, enough to block the cluster and name
   its drains' obstacles.
3. **Stored objects** of the catalog kinds still served at the cluster's minor
   (``orchestrator.domain.storedscan``): a paginated LIST of object metadata only
   (``PartialObjectMetadataList``) per kind, counting objects whose managedFields or
   last-applied annotation were written at an old group/version. At most ``MAX_OBJECTS`` objects
   are scanned per kind; past that the counts are lower bounds and the look is partial, named.

Every failure is a note in ``observation_partial``, never an exception and never a clean answer.
The only calls are GET ``/version``, discovery of the group/versions involved, GET
``/metrics`` and LISTs of kube-apiserver pods, of the catalog kinds and of PDBs (the RBAC of
docs/decisions.md "Observing workload clusters").
"""

from __future__ import annotations

import ipaddress
import logging
import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final, NamedTuple

from kubernetes import client

from orchestrator.domain.apicatalog import catalog
from orchestrator.domain.apis import GROUP_VERSION_PATTERN, ApiRef
from orchestrator.domain.disruption import disruption_blocker
from orchestrator.domain.observed import (
    MAX_BLOCKERS,
    MAX_INSTANCES,
    MAX_USAGES,
    ApiUsage,
    DisruptionBlocker,
    UsageSource,
)
from orchestrator.domain.promtext import DeprecatedRequests, LineReader, read_deprecated_requests
from orchestrator.domain.storedscan import (
    ScanTarget,
    object_name,
    scan_targets,
    written_versions,
)
from orchestrator.domain.versions import KubeVersion
from orchestrator.kube.bounded import (
    Deadline,
    failure_reason,
    get_json,
    get_stream,
    no_retry_client,
)

log = logging.getLogger(__name__)

ADVERTISE_ANNOTATION: Final = "kubeadm.kubernetes.io/kube-apiserver.advertise-address.endpoint"
APISERVER_SELECTOR: Final = "component=kube-apiserver"
METRICS_ACCEPT: Final = "text/plain;version=0.0.4"  # the text format, not OpenMetrics/protobuf
METADATA_ACCEPT: Final = (
    "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
)
PAGE: Final = 500
MAX_OBJECTS: Final = 10_000
"""Most objects scanned per kind (20 pages); past it counts are lower bounds, the look partial."""
MAX_PDBS: Final = 10_000
"""Most PDBs read per cluster; past it the look is partial."""
PARTIAL_LIMIT: Final = 900
_GROUP_VERSION = re.compile(GROUP_VERSION_PATTERN)
_RELEASE = re.compile(r"1\.(0|[1-9][0-9]{0,2})")  # as the snapshot format's removedRelease
_HOST_PORT = re.compile(
    r"(?:\[(?P<ip6>[0-9a-fA-F:.]+)\]|(?P<host>[A-Za-z0-9.-]+)):(?P<port>\d{1,5})"
)


class Observation(NamedTuple):
    """The three observed fields of ``WorkloadClusterStatus``, in its order."""

    api_usage: tuple[ApiUsage, ...]
    disruption_blockers: tuple[DisruptionBlocker, ...]
    observation_partial: str


@dataclass
class _Look:
    """What one observation has gathered so far, and why it is incomplete."""

    api: client.ApiClient
    deadline: Deadline
    now: datetime
    notes: list[str] = field(default_factory=list)
    discovered: dict[str, dict[str, Any] | None] = field(default_factory=dict)
    usage: list[ApiUsage] = field(default_factory=list)
    blockers: list[DisruptionBlocker] = field(default_factory=list)
    metrics_bytes: int = 0

    def resources(self, group_version: str) -> dict[str, Any] | None:
        """Discovery of one group/version (one GET each per look); None when it failed."""
        if group_version not in self.discovered:
            path = f"/apis/{group_version}" if "/" in group_version else f"/api/{group_version}"
            try:
                self.discovered[group_version] = get_json(self.api, path, self.deadline)
            except TimeoutError:
                raise
            except Exception as err:
                self.notes.append(f"discovery of {group_version}: {failure_reason(err)}")
                self.discovered[group_version] = None
        return self.discovered[group_version]

    def resource_entries(self, group_version: str) -> list[Mapping[str, Any]]:
        found = self.resources(group_version) or {}
        return [
            r
            for r in found.get("resources") or []
            if isinstance(r, Mapping) and "/" not in str(r.get("name", ""))
        ]


# ------------------------------------------------------------------------------- instances


def valid_endpoint(text: str) -> str | None:
    """``IP:port`` or ``host:port`` as a URL host, or None when it is not one.

    The annotation is data from the workload cluster; only a well-formed address is dialled (the
    kubeconfig's CA still decides whether the answer is trusted).
    """
    match = _HOST_PORT.fullmatch(text.strip())
    if match is None or not 0 < int(match["port"]) < 65536:
        return None
    if match["ip6"]:
        try:
            ipaddress.IPv6Address(match["ip6"])
        except ValueError:
            return None
    return text.strip()


def apiserver_instances(api: client.ApiClient, deadline: Deadline) -> tuple[list[str], str]:
    """(Each control-plane instance's ``host:port``, a note) from the kube-apiserver pods.

    An empty list means: read the kubeconfig's server as the one instance. The note says why
    when pods exist but name no instance (not kubeadm), "" otherwise.
    """
    page = get_json(
        api,
        "/api/v1/namespaces/kube-system/pods",
        deadline,
        {"labelSelector": APISERVER_SELECTOR, "limit": MAX_INSTANCES},
        accept=METADATA_ACCEPT,
    )
    pods = page.get("items") or []
    endpoints: list[str] = []
    for pod in pods:
        annotations = (pod.get("metadata") or {}).get("annotations") or {}
        endpoint = valid_endpoint(str(annotations.get(ADVERTISE_ANNOTATION) or ""))
        if endpoint and endpoint not in endpoints:
            endpoints.append(endpoint)
    if pods and not endpoints:
        return [], (
            f"{len(pods)} kube-apiserver pod(s) name no {ADVERTISE_ANNOTATION}: only the "
            "kubeconfig's server was read"
        )
    return endpoints, ""


@dataclass(frozen=True, slots=True)
class MetricsRead:
    """One apiserver's answer: what it says, the text read and the bytes on the wire (gzip)."""

    requests: DeprecatedRequests
    text_bytes: int
    wire_bytes: int


def instance_metrics(kubeconfig: dict[str, Any], host: str, deadline: Deadline) -> MetricsRead:
    """What ``host``'s ``/metrics`` says; ``host`` "" is the kubeconfig's server.

    Streamed, compressed on the wire when the apiserver compresses (it does for gzip): at most
    one line (``promtext.MAX_LINE``) and one chunk are held at a time.
    """
    api = no_retry_client(kubeconfig, f"https://{host}" if host else "")
    try:
        reader = LineReader()
        with get_stream(api, "/metrics", deadline, METRICS_ACCEPT, gzip=True) as body:
            read = read_deprecated_requests(reader.lines(body))
            return MetricsRead(read, reader.bytes, body.wire_bytes)
    finally:
        api.close()  # type: ignore[no-untyped-call]


def _kind_of(look: _Look, group_version: str, resource: str) -> str:
    for entry in look.resource_entries(group_version):
        if entry.get("name") == resource and isinstance(entry.get("kind"), str):
            return str(entry["kind"])
    return ""


def _metric_usage(look: _Look, kubeconfig: dict[str, Any]) -> None:
    try:
        endpoints, note = apiserver_instances(look.api, look.deadline)
    except TimeoutError:
        raise
    except Exception as err:
        endpoints, note = [], f"listing kube-apiserver pods: {failure_reason(err)}"
    if note:
        look.notes.append(note)
    instances = endpoints[:MAX_INSTANCES] or [""]
    server = look.api.configuration.host.removeprefix("https://")
    # (group, version, resource) -> (removed release, [(instance, requests)])
    seen: dict[tuple[str, str, str], tuple[str, list[tuple[str, int]]]] = {}
    for host in instances:
        name = host or server
        started = time.monotonic()
        try:
            metrics = instance_metrics(kubeconfig, host, look.deadline)
        except TimeoutError:
            look.notes.append(f"apiserver {name}: GET /metrics: no answer in time")
            raise
        except Exception as err:
            look.notes.append(f"apiserver {name}: GET /metrics: {failure_reason(err)}")
            continue
        look.metrics_bytes += metrics.wire_bytes
        log.debug(
            "read /metrics of %s in %.2fs: %d bytes (%d on the wire), %d lines",
            name,
            time.monotonic() - started,
            metrics.text_bytes,
            metrics.wire_bytes,
            metrics.requests.lines,
        )
        for use in metrics.requests.uses:
            r = use.resource
            release, counters = seen.setdefault(
                (r.group, r.version, r.resource), (use.removed_release, [])
            )
            counters.append((name, use.requests or 0))
            if use.requests is None:
                look.notes.append(f"apiserver {name}: request count of {r.resource} not tracked")
    for (group, version, resource), (release, counters) in sorted(seen.items()):
        group_version = f"{group}/{version}" if group else version
        if not _GROUP_VERSION.fullmatch(group_version) or not _RELEASE.fullmatch(release):
            # Deprecated with no removal planned (v1 Endpoints since 1.33, a CRD version marked
            # deprecated): no upgrade removes it, so there is nothing to block or warn about,
            # and the snapshot format's removedRelease is a release. A CRD version named outside
            # the vN[alphaN|betaN] scheme: no ApiRef can carry it.
            log.debug("not recorded: deprecated %s %s (%r)", group_version, resource, release)
            continue
        kind = _kind_of(look, group_version, resource)
        if not kind:
            look.notes.append(f"no kind for {group_version} {resource} in discovery")
            continue
        busiest = max(counters, key=lambda c: c[1])
        look.usage.append(
            ApiUsage(
                api=ApiRef(group, version, kind),
                resource=resource,
                source="metric",
                removed_release=release,
                first_seen=look.now,
                last_seen=look.now,
                observed_at=look.now,
                requests=sum(n for _, n in counters),
                example=busiest[0],
                counters=tuple(sorted(counters))[:MAX_INSTANCES],
            )
        )


# --------------------------------------------------------------------------- LIST in pages


def list_pages(
    look: _Look, path: str, limit: int, accept: str = "application/json"
) -> Iterator[list[dict[str, Any]]]:
    """The pages of one LIST, until done or ``limit`` objects have been yielded.

    Stops (and notes the look partial) when the limit is reached with more to come, and when
    the continue token expired midway (410): the counts so far are lower bounds either way.
    """
    token: str | None = None
    seen = 0
    while True:
        page = get_json(
            look.api, path, look.deadline, {"limit": PAGE, "continue": token}, accept=accept
        )
        items = page.get("items") or []
        seen += len(items)
        yield items
        token = (page.get("metadata") or {}).get("continue") or None
        if not token:
            return
        if seen >= limit:
            look.notes.append(f"{path}: stopped after {seen:,} objects (the cap)")
            return


def _blockers(look: _Look) -> None:
    found: list[DisruptionBlocker] = []
    try:
        for items in list_pages(look, "/apis/policy/v1/poddisruptionbudgets", MAX_PDBS):
            found += [b for b in map(disruption_blocker, items) if b is not None]
    except TimeoutError:
        raise
    except Exception as err:
        look.notes.append(f"listing PodDisruptionBudgets: {failure_reason(err)}")
    found.sort(key=lambda b: (b.namespace, b.name))
    look.blockers = found[:MAX_BLOCKERS]


# -------------------------------------------------------------------------- stored objects


def _minor(look: _Look) -> tuple[int, int] | None:
    try:
        info = get_json(look.api, "/version", look.deadline)
        return KubeVersion.parse(info.get("gitVersion")).minor_key
    except TimeoutError:
        raise
    except Exception as err:
        look.notes.append(f"reading /version: {failure_reason(err)}")
        return None


def _scan(look: _Look, target: ScanTarget) -> None:
    through, entry = next(
        (
            (gv, e)
            for gv in target.list_versions
            for e in look.resource_entries(gv)
            if e.get("kind") == target.kind
        ),
        ("", None),
    )
    if entry is None:  # a served group that does not serve the kind: nothing to read
        return
    resource = str(entry["name"])
    prefix = "/apis" if "/" in through else "/api"
    path = f"{prefix}/{through}/{resource}"
    wanted = {row.api.group_version: row for row in target.rows}
    counts: dict[tuple[str, UsageSource], tuple[int, str]] = {}
    try:
        for items in list_pages(look, path, MAX_OBJECTS, METADATA_ACCEPT):
            for item in items:
                metadata = item.get("metadata") or {}
                managed, applied = written_versions(metadata)
                hits: list[tuple[str, UsageSource]] = [
                    (gv, "managedFields") for gv in managed if gv in wanted
                ]
                if applied in wanted:
                    hits.append((applied, "annotation"))
                for key in hits:
                    n, example = counts.get(key, (0, ""))
                    counts[key] = (n + 1, example or object_name(metadata))
    except TimeoutError:
        raise
    except Exception as err:
        look.notes.append(f"listing {path}: {failure_reason(err)}")
    for (gv, source), (n, example) in sorted(counts.items()):
        row = wanted[gv]
        look.usage.append(
            ApiUsage(
                api=row.api,
                resource=resource,
                source=source,
                removed_release=row.removed_in_text,
                first_seen=look.now,
                last_seen=look.now,
                observed_at=look.now,
                objects=n,
                example=example,
            )
        )


def _stored_usage(look: _Look, served: Sequence[str]) -> None:
    minor = _minor(look)
    if minor is None:
        return
    for target in scan_targets(catalog(), minor, set(served)):
        _scan(look, target)


# ----------------------------------------------------------------------------------- observe


def _partial(notes: list[str]) -> str:
    """One line (the snapshot format's ``observationPartial``), each note once, clipped."""
    text = " ".join("; ".join(dict.fromkeys(notes)).split())
    return text if len(text) <= PARTIAL_LIMIT else text[: PARTIAL_LIMIT - 1] + "…"


def observe(
    api: client.ApiClient,
    kubeconfig: dict[str, Any],
    deadline: Deadline,
    now: datetime,
    served: Sequence[str],
    *,
    blockers_only: bool = False,
) -> Observation:
    """What one workload cluster is seen doing (see the module's docstring), at ``now``.

    ``api`` is a no-retry client of the cluster (``bounded.no_retry_client(kubeconfig)``);
    ``kubeconfig`` gives each control-plane instance the same credentials and CA; ``served`` is
    the cluster's discovery (``workload.api_versions``), which its caller has already read to
    know the cluster answers. The steps run in
    order of value (metrics, PDBs, stored objects); once the deadline passes, the steps not
    done are named in ``observation_partial``. Never raises for the cluster's answers. ``now``
    is kept to the second, as the snapshot format writes times, so that a live read and the
    file written from it compare equal. ``blockers_only`` reads the PDBs alone: a worker
    step's drain gate needs neither the metrics nor the stored-object scan.
    """
    look = _Look(api, deadline, now.replace(microsecond=0))
    steps: list[tuple[str, Callable[[], None]]] = [
        ("apiserver metrics", lambda: _metric_usage(look, kubeconfig)),
        ("PodDisruptionBudgets", lambda: _blockers(look)),
        ("stored objects", lambda: _stored_usage(look, served)),
    ]
    if blockers_only:
        steps = steps[1:2]
    done = 0
    started = time.monotonic()
    try:
        for _, step in steps:
            step()
            done += 1
    except TimeoutError:
        look.notes.append(f"no time left for {', '.join(name for name, _ in steps[done:])}")
    except Exception as err:  # a bug or a client fault: partial, never a clean answer
        look.notes.append(f"observation failed during {steps[done][0]}: {failure_reason(err)}")
    log.debug(
        "observed %s in %.2fs: %d usages, %d blockers, %d bytes of /metrics on the wire",
        api.configuration.host,
        time.monotonic() - started,
        len(look.usage),
        len(look.blockers),
        look.metrics_bytes,
    )
    usage = sorted(look.usage, key=lambda u: (u.api, u.source))[:MAX_USAGES]
    return Observation(tuple(usage), tuple(look.blockers), _partial(look.notes))
