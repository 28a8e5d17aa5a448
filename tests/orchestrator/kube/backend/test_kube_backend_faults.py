"""How KubeFleetBackend and the activities handle API faults (docs/decisions.md, "API faults").

A 409 on a version write is re-read and re-decided in the backend; a 403 (the kubeconfig secret
included) and an invalid FleetWorkload are one non-retryable failure each, through the one
classification of ``workflows.activities``; a call whose activity ended stops sending requests.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest
from kubernetes import client
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from orchestrator.domain.versions import KubeVersion
from orchestrator.kube import workload
from orchestrator.kube.backend.access import CONFLICT_RETRIES
from orchestrator.kube.backend.port import (
    BackendError,
    InvalidObjectError,
    NotAllowedError,
    NotFoundError,
    VersionChangedError,
)
from orchestrator.kube.backend.versions import STEP_ANNOTATION
from orchestrator.kube.client import CallCancelled, RequestPolicy, harden
from tests.orchestrator.kube.api_server import Fault, faulty_server
from tests.orchestrator.kube.backend.recording_backend import RecordingKubeBackend
from tests.orchestrator.kube.backend.test_kube_backend import REF, one_cluster_fleet
from tests.orchestrator.kube.fake_dyn import NS, ApiError, FakeDyn, Resource
from workflows.activities import (
    INVALID_INPUT,
    NOT_ALLOWED,
    NOT_FOUND,
    VERSION_CONFLICT,
    CalibrationActivities,
    classify,
)
from workflows.model import PlanInput, PreflightInput

READY = {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}
Hook = Callable[[FakeDyn, str, str, dict[str, Any]], None]


class _HookedResource(Resource):
    def patch(
        self,
        body: dict[str, Any],
        name: str,
        namespace: str,
        content_type: str,
        serialize: bool = True,
    ) -> Any:
        store = self.store
        assert isinstance(store, HookedDyn)
        if store.before:
            store.before.pop(0)(store, self.kind, name, body)
        result = super().patch(body, name, namespace, content_type)
        if store.after:
            store.after.pop(0)(store, self.kind, name, body)
        return result


class HookedDyn(FakeDyn):
    """FakeDyn whose next patches run hooks first (``before``) or after they applied (``after``)."""

    def __init__(self) -> None:
        super().__init__()
        self.before: list[Hook] = []
        self.after: list[Hook] = []

    def get(self, api_version: str, kind: str) -> Resource:
        return _HookedResource(self, kind)


def hooked(topology: bool) -> HookedDyn:
    dyn = HookedDyn()
    dyn.objects = one_cluster_fleet(topology).objects
    dyn.rv = 100
    return dyn


@pytest.fixture(autouse=True)
def _nodes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(workload, "workload_client", lambda *a: object())
    monkeypatch.setattr(workload, "nodes", lambda api: {"cp-m": READY, "md-m": READY})


def touched(dyn: FakeDyn, kind: str, name: str, body: dict[str, Any]) -> None:
    """A controller wrote the object between our read and our write (new resourceVersion)."""
    dyn.bump(dyn.objects[kind][(NS, name)])


def moved_by_someone(dyn: FakeDyn, kind: str, name: str, body: dict[str, Any]) -> None:
    obj = dyn.objects[kind][(NS, name)]
    if kind == "KubeadmControlPlane":
        obj["spec"]["version"] = "v1.35.0"
    elif kind == "MachineDeployment":
        obj["spec"]["template"]["spec"]["version"] = "v1.35.0"
    else:
        obj["spec"]["topology"]["version"] = "v1.35.0"
    dyn.bump(obj)


def answer_lost(dyn: FakeDyn, kind: str, name: str, body: dict[str, Any]) -> None:
    """The write applied but its answer was lost: the client's retry of it meets a 409."""
    raise ApiError(409)


def _write(backend: RecordingKubeBackend, what: str) -> None:
    if what == "pool":
        asyncio.run(backend.set_pool_version(REF, "c1-md-0", "v1.34.0", "s2"))
    else:
        asyncio.run(backend.set_control_plane_version(REF, "v1.34.0", "s1"))


WRITES = [("kcp", False), ("topology", True), ("pool", False)]


@pytest.mark.parametrize(("what", "topology"), WRITES)
def test_a_conflicting_version_write_is_reread_and_written_once(what: str, topology: bool) -> None:
    dyn = hooked(topology)
    dyn.before = [touched, touched]  # two controllers got in first
    backend = RecordingKubeBackend(None, NS, dyn=dyn)
    _write(backend, what)
    assert len(dyn.patches) == 1, dyn.patches
    assert sum(backend.patches.values()) == 1
    _, _, body = dyn.patches[0]
    assert body["metadata"]["annotations"][STEP_ANNOTATION] in ("s1", "s2")
    assert body["metadata"]["resourceVersion"] == "102"  # written on the object as re-read


@pytest.mark.parametrize(("what", "topology"), WRITES)
def test_a_write_whose_answer_was_lost_is_not_written_again(what: str, topology: bool) -> None:
    dyn = hooked(topology)
    dyn.after = [answer_lost]
    backend = RecordingKubeBackend(None, NS, dyn=dyn)
    _write(backend, what)  # the re-read finds the version and the step id: done
    assert len(dyn.patches) == 1, dyn.patches
    _write(backend, what)  # and a Temporal retry of the activity writes nothing either
    assert len(dyn.patches) == 1


@pytest.mark.parametrize(("what", "topology"), WRITES)
def test_a_version_moved_by_someone_else_is_not_overwritten(what: str, topology: bool) -> None:
    dyn = hooked(topology)
    dyn.before = [moved_by_someone]
    backend = RecordingKubeBackend(None, NS, dyn=dyn)
    with pytest.raises(VersionChangedError, match=r"now declares v1\.35\.0") as caught:
        _write(backend, what)
    assert dyn.patches == [] and not backend.patches
    failure = classify(caught.value)
    assert isinstance(failure, ApplicationError)
    assert failure.type == VERSION_CONFLICT and failure.non_retryable


def test_conflicts_that_never_end_go_back_to_temporal_after_bounded_rereads() -> None:
    dyn = hooked(topology=False)
    dyn.before = [touched] * 50
    backend = RecordingKubeBackend(None, NS, dyn=dyn)
    with pytest.raises(ApiError) as caught:
        _write(backend, "kcp")
    assert caught.value.status == 409
    assert len(dyn.before) == 50 - CONFLICT_RETRIES and dyn.patches == []


class Forbidden(ApiError):
    def __init__(self) -> None:
        super().__init__(403)
        self.body = json.dumps(
            {"kind": "Status", "message": 'secrets "c1-kubeconfig" is forbidden: User "w"'}
        )


def _preflight(backend: Any) -> Any:
    acts = CalibrationActivities(backend)
    check = PreflightInput("cal", REF, "v1.33.0", (("c1-md-0", KubeVersion.parse("v1.33.0")),), ())
    return asyncio.run(ActivityEnvironment().run(acts.preflight, check))


def test_403_on_the_kubeconfig_secret_is_not_allowed_not_unreachable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def refuse(*args: Any) -> Any:
        raise Forbidden()

    monkeypatch.setattr(workload, "workload_client", refuse)
    backend = RecordingKubeBackend(None, NS, dyn=one_cluster_fleet(topology=False))
    with pytest.raises(NotAllowedError, match=rf"not allowed to read Secret {NS}/c1-kubeconfig"):
        asyncio.run(backend.observe(REF))
    with pytest.raises(ApplicationError) as caught:
        _preflight(backend)
    assert caught.value.type == NOT_ALLOWED and caught.value.non_retryable
    assert (
        "is forbidden" in caught.value.message and "deploy/fleet-namespace" in caught.value.message
    )


def test_a_missing_secret_is_unreachable_and_other_secret_faults_are_retried(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    errors = iter([ApiError(404), KeyError("value"), ApiError(500)])

    def fail(*args: Any) -> Any:
        raise next(errors)

    monkeypatch.setattr(workload, "workload_client", fail)
    backend = RecordingKubeBackend(None, NS, dyn=one_cluster_fleet(topology=False))
    assert not asyncio.run(backend.observe(REF)).reachable  # CAPI has not written it yet
    assert not asyncio.run(backend.observe(REF)).reachable  # it holds no usable kubeconfig
    with pytest.raises(ApiError) as caught:  # a management-plane fault, not the cluster's
        asyncio.run(backend.observe(REF))
    assert caught.value.status == 500 and not isinstance(caught.value, BackendError)


def _refuse(dyn: FakeDyn, kind: str, name: str, body: dict[str, Any]) -> None:
    raise Forbidden()


def test_403_on_a_management_call_is_not_allowed() -> None:
    dyn = hooked(topology=False)
    dyn.before = [_refuse, _refuse]  # refused, and refused again when asked once more
    backend = RecordingKubeBackend(None, NS, dyn=dyn)
    with pytest.raises(NotAllowedError, match=r"^set_control_plane_version: .* is forbidden"):
        _write(backend, "kcp")


class Readyz:
    """The management client's ``/readyz`` answer: 200, or a starting API server's 500.

    It has the generated client's two calls with their real signatures (``param_serialize``,
    then ``call_api`` as ``client.harden`` replaces it), so a call the real client refuses
    fails here too.
    """

    def __init__(self, ready: bool) -> None:
        self.ready = ready
        self.asked = 0

    def param_serialize(
        self, method: str, resource_path: str, *, auth_settings: list[str]
    ) -> tuple[str, str, dict[str, str], None, list[str]]:
        return method, f"https://api{resource_path}", {"authorization": "Bearer t"}, None, []

    def call_api(
        self,
        method: str,
        url: str,
        header_params: Any = None,
        body: Any = None,
        post_params: Any = None,
        _request_timeout: Any = None,
    ) -> Any:
        assert (method, url) == ("GET", "https://api/readyz")
        self.asked += 1
        return SimpleNamespace(status=200 if self.ready else 500, read=lambda: b"")


@pytest.mark.parametrize("ready", [True, False])
def test_a_403_is_final_only_when_it_comes_again_from_an_api_server_that_says_it_is_ready(
    ready: bool,
) -> None:
    dyn = hooked(topology=False)
    dyn.before = [_refuse, _refuse]
    backend = RecordingKubeBackend(None, NS, dyn=dyn)
    readyz = Readyz(ready)
    backend._mgmt = readyz  # the API server as seen right after a restart, or settled
    with pytest.raises(BackendError) as caught:
        _write(backend, "kcp")
    assert readyz.asked == 1
    if ready:  # asked again once ready, refused again: a missing permission
        assert isinstance(caught.value, NotAllowedError)
        assert dyn.before == []
    else:  # its authorizer's caches are not in yet: transient, retried by Temporal
        assert not isinstance(caught.value, NotAllowedError)
        assert "while not ready (/readyz)" in str(caught.value)
        assert classify(caught.value) is caught.value
        assert dyn.before == [_refuse]  # not asked again here: Temporal retries the activity


def test_a_403_from_before_the_api_server_was_ready_is_asked_again_and_answered() -> None:
    """Refused while the authorizer's caches synced, then /readyz already says 200 (the outage
    drill on a loaded machine): the request is made once more and goes through."""
    dyn = hooked(topology=False)
    dyn.before = [_refuse]
    backend = RecordingKubeBackend(None, NS, dyn=dyn)
    readyz = Readyz(True)
    backend._mgmt = readyz
    _write(backend, "kcp")
    assert readyz.asked == 1 and dyn.before == [] and len(dyn.patches) == 1


def test_an_invalid_fleet_workload_fails_once_not_five_times() -> None:
    dyn = one_cluster_fleet(topology=True)
    dyn.objects["FleetWorkload"][(NS, "web")]["spec"]["apis"] = ["not-an-api"]
    acts = CalibrationActivities(RecordingKubeBackend(None, NS, dyn=dyn))
    with pytest.raises(ApplicationError) as caught:
        asyncio.run(ActivityEnvironment().run(acts.plan_fleet, PlanInput("cal", "v1.34.0", None)))
    assert caught.value.type == INVALID_INPUT and caught.value.non_retryable
    assert caught.value.message.startswith(f"FleetWorkload {NS}/web: spec.apis[0]")


@pytest.mark.parametrize(
    ("error", "error_type"),
    [
        (NotFoundError("x"), NOT_FOUND),
        (NotAllowedError("x"), NOT_ALLOWED),
        (InvalidObjectError("x"), INVALID_INPUT),
        (VersionChangedError("x"), VERSION_CONFLICT),
    ],
)
def test_one_classification_of_backend_errors(error: BackendError, error_type: str) -> None:
    failure = classify(error)
    assert isinstance(failure, ApplicationError)
    assert failure.type == error_type and failure.non_retryable


def test_other_backend_errors_stay_retryable() -> None:
    error = BackendError("held by an operator's annotation")
    assert classify(error) is error


def test_a_call_whose_activity_ended_stops_its_thread() -> None:
    """The thread cannot be killed; it is told to stop before its next request."""
    backend = RecordingKubeBackend(None, NS, dyn=one_cluster_fleet(topology=False))
    waiting = threading.Event()
    stopped = threading.Event()
    slow = RequestPolicy(timeout=2.0, attempts=3, backoff=60.0, max_backoff=60.0)

    with faulty_server([Fault("status", 503, {})] * 3) as (api, seen):
        harden(api, slow, lambda *_: waiting.set())  # a 503: the client waits 60 s to retry

        def blocking() -> None:
            try:
                client.CoreV1Api(api).list_node()
            except CallCancelled:
                stopped.set()

        async def activity() -> None:
            task = asyncio.ensure_future(backend._call("observe", {}, blocking))
            await asyncio.to_thread(waiting.wait, 30)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

        asyncio.run(activity())
        assert stopped.wait(30)  # the wait was cut short, long before its 60 s
    assert len(seen) == 1  # and no second request was sent
