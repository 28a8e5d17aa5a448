"""What the parts of ``KubeFleetBackend`` share: the clients, reads and patches, hooks, the call thread.

``KubeAccess`` holds the management-cluster client (hardened: timeouts and bounded retries,
``client.harden``), the resource cache and the workload-cluster clients, and runs every
protocol call in a thread (``_call``). The concern classes (``inventory``, ``rollout``,
``versions``, ``taints``, ``placement``, ``blobs``) derive from it and ``fleet.KubeFleetBackend``
combines them, so every part sees the same client, lock and hooks.

**Faults** (docs/decisions.md, "API faults"): every request has a timeout and transient
failures (429 with its Retry-After, 5xx, resets, timeouts) are retried a bounded number of times
inside the call (``client.harden``); 404s become ``NotFoundError``, 403s ``NotAllowedError``, an
unusable FleetWorkload ``InvalidObjectError``; anything else propagates and is retried by
Temporal. Nothing returned contains a credential.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import threading
from collections.abc import Callable, Hashable, Mapping, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

from orchestrator.domain.versions import KubeVersion, VersionError
from orchestrator.kube import capi, workload
from orchestrator.kube.backend.port import BackendError, ClusterRef, NotAllowedError, NotFoundError
from orchestrator.kube.cache import FLEET_KINDS, CacheNotSynced, FleetCache, version_reached
from orchestrator.kube.client import (
    DEFAULT_REQUESTS,
    RETRYABLE_ERRORS,
    CallCancelled,
    RequestObserver,
    RequestPolicy,
    dynamic,
    harden,
    list_pages,
    object_meta,
    observe_requests,
    read_json,
    run_cancellable,
    status_code,
)
from orchestrator.kube.fleetmap import ParsedFleet
from orchestrator.kube.tracing import request_spans

MERGE_PATCH = "application/merge-patch+json"
CONFLICT_RETRIES = 5
FORBIDDEN = 403
REASON_LIMIT = 300
# Threads for the backend's calls: one per activity the worker may run at once (Temporal's
# default: 100 activity slots), started only when needed. The event loop's default pool has
# min(32, CPUs + 4), 6 on 2 cores: in the 100-cluster benchmark with 1,000 FleetWorkloads
# (issue 9) twenty re-placements' fleet LISTs held all 6, and every other activity's short calls
# (observe, patches, taints) queued behind them for tens of seconds.
CALL_THREADS = 100
# Fleet-wide reads (the inventory, what the placement writer compares with) at once: each holds
# the whole fleet in memory, so they keep a pool of their own, as many as the default pool gave
# them there.
FLEET_READERS = 6

T = TypeVar("T")
log = logging.getLogger(__name__)


def _refusal(err: BaseException) -> str:
    """The API server's own words for a refused request (its Status message), clipped."""
    message = ""
    body = getattr(err, "body", None)
    if body:
        try:
            message = str(json.loads(body).get("message") or "")
        except (ValueError, TypeError, AttributeError):
            message = ""
    text = " ".join((message or str(getattr(err, "reason", "") or "")).split())
    return text if len(text) <= REASON_LIMIT else text[: REASON_LIMIT - 1] + "…"


def object_annotations(obj: Mapping[str, Any]) -> Mapping[str, str]:
    """An object's annotations (empty if absent); shared: the concern classes keep their state there."""
    return object_meta(obj).get("annotations") or {}


def same_version(a: str | None, b: str | None) -> bool:
    """Whether two Kubernetes version strings name the same version (as text when unparseable).

    Shared by the rollout observer and the version writes, which compare declared and actual versions.
    """
    if a is None or b is None:
        return a == b
    try:
        return KubeVersion.parse(a) == KubeVersion.parse(b)
    except VersionError:
        return a == b


@dataclass(frozen=True)
class PatchRecord:
    """A write of a version the backend performed (tests assert no step is applied twice)."""

    cluster: str
    component: str
    version: str
    step_id: str
    kind: str


class KubeAccess:
    """The state and plumbing every part of ``KubeFleetBackend`` uses (see the module docstring)."""

    def __init__(
        self,
        mgmt: Any,
        namespace: str | None = None,
        *,
        plan_namespace: str | None = None,
        dyn: Any = None,
        tracer: Any = None,
        requests: RequestPolicy = DEFAULT_REQUESTS,
        cache: bool | FleetCache = False,
    ) -> None:
        self._mgmt = mgmt
        self._tracer = tracer
        self._requests = requests
        self._observer: RequestObserver | None = None
        if tracer is not None:
            self._observer = request_spans(tracer)
            observe_requests(mgmt, self._observer)
        if mgmt is not None:
            # Outside the observer: every attempt is its own span, retries included.
            harden(mgmt, requests, self.retried)
        self._dyn = dyn if dyn is not None else dynamic(mgmt)
        self._namespace = namespace
        # Where the calibration plans are kept (``blobs``): given, else the fleet's one namespace,
        # else ``default`` (the worker in a pod passes its own namespace: docs/decisions.md).
        self._plan_namespace = plan_namespace or namespace or "default"
        self._lock = threading.Lock()
        self._resources: dict[tuple[str, str], Any] = {}
        self._workload_clients: dict[tuple[str, str], Any] = {}
        self._threads = ThreadPoolExecutor(CALL_THREADS, thread_name_prefix="kube-call")
        self._fleet_reads = ThreadPoolExecutor(FLEET_READERS, thread_name_prefix="fleet-read")
        # The worker's watch-fed cache of the fleet (``cache=True``; docs/decisions.md, "Reads
        # from a watch-fed cache"), and per cached kind the resourceVersion the next read from it
        # must have seen: this backend's own writes and the versions its conflicts revealed.
        # (Tests pass a FleetCache over fake streams.)
        self._cache = (
            cache
            if isinstance(cache, FleetCache)
            else FleetCache(self._dyn, namespace)
            if cache
            else None
        )
        self._fresh: dict[Hashable, str] = {}
        # The clusters and workloads parsed from the cache's objects, kept by resourceVersion:
        # a read parses only the objects written since the last (``fleetmap.ParsedFleet``).
        self._parsed = ParsedFleet() if self._cache is not None else None

    def start(self) -> None:
        """Start the watch-fed cache, if this backend has one (idempotent; returns at once)."""
        if self._cache is not None:
            self._cache.start()

    def close(self) -> None:
        """Stop the cache's watches (the worker stops); a backend without one has nothing to do."""
        if self._cache is not None:
            self._cache.stop()

    def _saw(self, kind: tuple[str, str], version: str) -> None:
        """A cached kind is at ``version`` or later: the cache must reach it before it is read."""
        if self._cache is None or not version or kind not in FLEET_KINDS:
            return
        with self._lock:
            have = self._fresh.get(kind, "")
            if not have or version_reached(version, have):
                self._fresh[kind] = version

    def retried(self, method: str, url: str, why: str, delay: float) -> None:
        """Called before a request is tried again (``client.harden``); a no-op here.

        The client logs each retry; tests subclass the backend to count them.
        """

    def _res(self, kind: tuple[str, str]) -> Any:
        with self._lock:
            if kind not in self._resources:
                self._resources[kind] = self._dyn.resources.get(api_version=kind[0], kind=kind[1])
            return self._resources[kind]

    def _list(
        self, kind: tuple[str, str], namespace: str | None, label_selector: str = ""
    ) -> list[dict[str, Any]]:
        return list_pages(self._res(kind), namespace=namespace, label_selector=label_selector)

    def _get(self, kind: tuple[str, str], namespace: str, name: str) -> dict[str, Any]:
        try:
            obj = read_json(self._res(kind).get, name=name, namespace=namespace)
        except Exception as err:
            if status_code(err) == 404:
                raise NotFoundError(f"{kind[1]} {namespace}/{name} not found") from None
            raise
        return obj

    def _patch(
        self, kind: tuple[str, str], namespace: str, name: str, body: Mapping[str, Any]
    ) -> dict[str, Any]:
        try:
            obj = read_json(
                self._res(kind).patch,
                body=dict(body),
                name=name,
                namespace=namespace,
                content_type=MERGE_PATCH,
            )
        except Exception as err:
            if status_code(err) == 404:
                raise NotFoundError(f"{kind[1]} {namespace}/{name} not found") from None
            raise
        self._saw(kind, str(object_meta(obj).get("resourceVersion") or ""))  # read your writes
        return obj

    def _namespace_of(self, ref: ClusterRef) -> str:
        """The namespace of the Cluster ``ref`` names: given, the backend's one, else looked up."""
        if ref.namespace:
            return ref.namespace
        if self._namespace:
            return self._namespace
        found = self._live_clusters_named(ref.name)
        if not found:
            raise NotFoundError(f"cluster {ref.name!r} not found")
        if len(found) > 1:
            raise NotFoundError(f"cluster {ref.name!r} exists in several namespaces: name one")
        return str(object_meta(found[0])["namespace"])

    def _live_clusters_named(self, name: str) -> list[dict[str, Any]]:
        """Clusters called ``name`` in any namespace, not being deleted: cached, else one LIST.

        A Cluster keeps its namespace for life, so the cache can be behind in one way only: a
        Cluster created (or one's deletion begun) since its last event. A name it does not know
        (and a cache not synced or lagging: ``FleetCache.named``) is therefore looked up by a LIST
        of every Cluster, as before the cache; a name it knows is answered from memory. The
        caller GETs the Cluster it names next (``_cluster``), so nothing is acted on from the
        cache but the namespace. One more name in another namespace that the cache has not seen
        yet is the same race a LIST had with a create landing right after it.
        """
        found: list[dict[str, Any]] = []
        if self._cache is not None:
            self._cache.start()  # idempotent, as the inventory's first read
            try:
                found = self._cache.named(capi.CLUSTER, name)
            except CacheNotSynced as err:
                log.info("%s: finding cluster %r LISTs instead", err, name)
        found = [c for c in found if not object_meta(c).get("deletionTimestamp")]
        if found:
            return found
        return [
            c
            for c in self._list(capi.CLUSTER, None)
            if object_meta(c).get("name") == name and not object_meta(c).get("deletionTimestamp")
        ]

    def _cluster(self, ref: ClusterRef) -> tuple[str, dict[str, Any]]:
        ns = self._namespace_of(ref)
        obj = self._get(capi.CLUSTER, ns, ref.name)
        if object_meta(obj).get("deletionTimestamp"):
            raise NotFoundError(f"cluster {ns}/{ref.name} is being deleted")
        return ns, obj

    def _kcp_name(self, cluster: Mapping[str, Any]) -> str:
        ref = (cluster.get("spec") or {}).get("controlPlaneRef") or {}
        name = ref.get("name")
        if not name:
            raise NotFoundError(
                f"cluster {object_meta(cluster).get('name')} has no controlPlaneRef yet"
            )
        return str(name)

    def _workload_api(self, namespace: str, cluster: str) -> Any:
        """A client of the workload cluster, or None while CAPI has not written its secret.

        Reading the secret is a management-cluster call: a refusal is ``NotAllowedError`` (an
        operator must bind the kubeconfig reader there: list the namespace in the deploy
        overlay, deploy/fleet-namespace) and any other error status or a transport failure
        propagates (Temporal retries); neither is "the workload cluster is unreachable". A
        secret without a usable kubeconfig is (None), as before.
        """
        key = (namespace, cluster)
        with self._lock:
            api = self._workload_clients.get(key)
        if api is None:
            secret = f"Secret {namespace}/{cluster}-kubeconfig"
            try:
                api = workload.workload_client(self._mgmt, namespace, cluster)
            except Exception as err:
                status = status_code(err)
                if status == 404:
                    return None
                if status in (401, FORBIDDEN):
                    raise NotAllowedError(
                        f"not allowed to read {secret} ({_refusal(err) or status}): bind the "
                        f"kubeconfig reader role in {namespace} (list {namespace} as a fleet "
                        "namespace of the deploy overlay: deploy/fleet-namespace)"
                    ) from None
                if status is not None or isinstance(err, (*RETRYABLE_ERRORS, CallCancelled)):
                    raise
                return None  # the secret holds no usable kubeconfig: unreachable, as reported
            if self._observer is not None:
                observe_requests(api, self._observer)
            with self._lock:
                self._workload_clients[key] = api
        return api

    def _nodes(self, namespace: str, cluster: str) -> dict[str, dict[str, Any]] | None:
        """The workload cluster's Nodes, or None when it is not reachable."""
        api = self._workload_api(namespace, cluster)
        if api is None:
            return None
        try:
            return workload.nodes(api)
        except CallCancelled:
            raise
        except Exception:
            with self._lock:
                self._workload_clients.pop((namespace, cluster), None)
            return None

    def _record(self, cluster: str, component: str, version: str, step_id: str, kind: str) -> None:
        with self._lock:  # activities run on threads: a subclass's records stay consistent
            self.wrote_version(PatchRecord(cluster, component, version, step_id, kind))

    def wrote_version(self, record: PatchRecord) -> None:
        """Called after every version write; a no-op here.

        Tests subclass the backend to count writes (no step may be applied twice). The worker
        keeps nothing per write: a long-running worker must not grow with the writes it made.
        """

    def wrote_placements(self, workloads: Sequence[str], reason: str) -> None:
        """Called after placement decisions were written; a no-op here (see ``wrote_version``)."""

    @staticmethod
    def _on_conflict(write: Callable[[list[str]], None]) -> None:
        """Run a version write; on 409 re-read and re-decide (``write`` reads afresh each time).

        A conflict is common and harmless (a controller touched the object between our read
        and our write); the next pass either finds the version already declared (a write whose
        answer was lost: nothing to do) or writes again on the new resourceVersion.
        """
        seen: list[str] = []
        for attempt in range(CONFLICT_RETRIES):
            try:
                write(seen)
                return
            except Exception as err:
                if status_code(err) != 409 or attempt + 1 == CONFLICT_RETRIES:
                    raise
                log.info("version write conflicted (409); re-reading (attempt %d)", attempt + 1)

    async def _call(
        self,
        operation: str,
        attributes: Mapping[str, str | int],
        fn: Callable[[], T],
        executor: Executor | None = None,
    ) -> T:
        """Run blocking client calls in a thread (with the caller's context, so spans nest).

        The thread comes from ``executor``, or the backend's own pool (``CALL_THREADS``, shared
        by every activity of the worker; not the loop's default pool, too small for them).
        Fleet-wide reads pass ``self._fleet_reads``: they wait for each other, never the short
        calls for them.

        When the awaiting activity ends first (timeout, cancellation) the thread is told to stop
        before its next request (``client.run_cancellable``), so it outlives the activity by at
        most one request timeout. A 403 from the management cluster is ``NotAllowedError`` only
        when it comes again once the API server says it is ready.
        """
        cancel = threading.Event()

        def body() -> T:
            asked_when_ready = False
            while True:
                try:
                    return fn()
                except BackendError:
                    raise
                except Exception as err:
                    if status_code(err) != FORBIDDEN:
                        raise
                    refusal = f"the API server refused it: {_refusal(err) or 'Forbidden'}"
                    if asked_when_ready:
                        raise NotAllowedError(f"{operation}: {refusal}") from None
                    if not self._api_server_ready():
                        raise BackendError(
                            f"{operation}: {refusal}, while not ready (/readyz): retried"
                        ) from None
                # Ready now, but the 403 may predate it: the authorizer's caches sync a moment
                # before /readyz turns 200, and on a loaded machine that moment is wide (the
                # outage drill's `get clusters` was refused, then /readyz said 200). A refused
                # request did nothing, so it is made once more; a second 403 is final.
                asked_when_ready = True

        def run() -> T:
            if self._tracer is None:
                return run_cancellable(body, cancel)
            with self._tracer.start_as_current_span(f"kube.{operation}", attributes=attributes):
                return run_cancellable(body, cancel)

        try:
            context = contextvars.copy_context()
            return await asyncio.get_running_loop().run_in_executor(
                executor or self._threads, context.run, run
            )
        finally:
            cancel.set()  # a no-op once the thread is done

    def _api_server_ready(self) -> bool:
        """Whether the management API server says it is ready (``GET /readyz``, 200).

        A kube-apiserver serves requests as soon as it listens, before its authorizer's caches
        have synced, and meanwhile answers 403 to requests its roles allow (seen right after a
        restart on a loaded machine: the worker's ``get clusters`` refused, then allowed). Its
        ``/readyz`` (readable by anyone, ``system:public-info-viewer``) stays failing until those
        caches are in (``informer-sync``), so a 403 while it fails is transient, not a missing
        permission. Any failure to ask counts as not ready: the call is then retried.
        """
        if self._mgmt is None:
            return True
        try:
            request = self._mgmt.param_serialize(
                method="GET", resource_path="/readyz", auth_settings=["BearerToken"]
            )
            answer = self._mgmt.call_api(*request, _request_timeout=self._requests.timeout)
            answer.read()  # the body, so the connection goes back to the pool
            return int(answer.status) == 200
        except Exception:
            return False

    @staticmethod
    def _cluster_attributes(ref: ClusterRef) -> dict[str, str | int]:
        attributes: dict[str, str | int] = {"calibrator.cluster": ref.name}
        if ref.namespace:
            attributes["k8s.namespace.name"] = ref.namespace
        return attributes
