"""Temporal-facing commands: worker, calibrate, status, pause, resume, approve, retry, skip, abort.

Thin wrappers over ``workflows.client`` / ``workflows.worker``; every refusal of an update
validator comes back as one stderr line (exit 2), like any other bad input.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import asdict
from pathlib import Path
from typing import IO, TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from orchestrator.cli.live import kubeconfig_path
from orchestrator.cli.output import Format, emit, fail, new_table
from orchestrator.cli.telemetry import (
    HealthAddressOpt,
    MetricsAddressOpt,
    client_tracing,
    worker_health,
    worker_telemetry,
)
from orchestrator.cli.temporal import (
    FROM_ENVIRONMENT,
    ConnectionFlags,
    connect,
    connection_options,
    resolve,
)

if TYPE_CHECKING:  # Rich only when a command prints for people
    from rich.console import Console
    from rich.table import Table

    from workflows.model import CalibrationInput

T = TypeVar("T")

OutputOpt = Annotated[Format, typer.Option("--output", "-o", help="table, json or yaml.")]
KubeconfigOpt = Annotated[
    Path | None,
    typer.Option(
        "--kubeconfig",
        help="Management cluster kubeconfig (default: $KUBECONFIG, ~/.kube/config, in-cluster, "
        "local plane).",
    ),
]
ContextOpt = Annotated[str | None, typer.Option("--context", help="kubeconfig context.")]
ReasonOpt = Annotated[str, typer.Option("--reason", help="Why (recorded in the workflow).")]


def _health_url(sock: Any) -> str:
    """Where /livez and /readyz are served ("off" without a socket)."""
    if sock is None:
        return "off"
    host, port = sock.getsockname()[:2]
    host = f"[{host}]" if ":" in host else host
    return f"http://{host}:{port}/readyz"


def _run(coro: Awaitable[T]) -> T:
    import asyncio  # here: commands without Temporal do not pay for it

    return asyncio.run(coro)  # type: ignore[arg-type]


async def _client(options: ConnectionFlags, **extra: Any) -> Any:
    """A connected client; ``extra`` adds ``Client.connect`` options (runtime, interceptors)."""
    return await connect(options, **extra)


def _progress_doc(progress: Any) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(json.dumps(asdict(progress), default=str))
    return doc


def progress_table(con: Console, doc: dict[str, Any]) -> None:
    """People's view of a calibration's progress."""
    con.print(renderable(doc))


def renderable(doc: dict[str, Any]) -> Table:
    """A Rich table of stage / cluster / step states."""
    title = f"{doc['calibration_id']} -> {doc['target']}: {doc['phase']}"
    if doc.get("paused"):
        title += " (paused)"
    table = new_table(title, ("Cluster", "Stage", "State", "From", "Tainted", "Moved", "Message"))
    caption = [str(doc.get("message") or "")]
    counts = doc.get("counts") or {}
    if counts:
        # Large fleets: the rows are the clusters in flight, failed or just finished; the
        # counts cover every cluster of the plan.
        total = doc.get("total_clusters") or sum(counts.values())
        caption.append(
            f"{total} clusters: " + ", ".join(f"{n} {state}" for state, n in sorted(counts.items()))
        )
    caption.append(
        f"replicas moved by placement: {doc.get('replicas_moved') or 0}"
        f" (forced: {doc.get('replicas_forced') or 0})"
    )
    table.caption = "\n".join(c for c in caption if c) or None
    for c in doc.get("clusters", []):
        table.add_row(
            c["name"],
            c.get("stage", ""),
            str(c.get("state", "")),
            c.get("from_version", ""),
            "yes" if c.get("tainted") else "no",
            moved_cell(c),
            row_message(c),
        )
    return table


def moved_cell(cluster: dict[str, Any]) -> str:
    """Replicas the cluster's placements moved, per step, and how many were forced.

    ``5 (steps 0/3/2, forced 2)``: "forced" is the part the placements had to remove from
    clusters their decisions reject, so an operator can tell churn the upgrade caused (moved
    well above forced) from moves it could not avoid.
    """
    total = int(cluster.get("replicas_moved") or 0)
    forced = int(cluster.get("replicas_forced") or 0)
    steps = [int(s.get("replicas_moved") or 0) for s in cluster.get("steps") or ()]
    parts = [f"steps {'/'.join(map(str, steps))}"] if steps else []
    if forced:
        parts.append(f"forced {forced}")
    return f"{total} ({', '.join(parts)})" if parts else str(total)


# States whose message is the reason an operator must read (a failed step, why a cluster was
# left tainted): they get the room of a blocked cluster's reasons, not a progress line's.
_EXPLAINED_STATES = frozenset({"WaitingForDecision", "Failed", "Skipped", "Aborted"})


def row_message(cluster: dict[str, Any]) -> str:
    """The Message cell: what the cluster does now; for a blocked or failed cluster, why.

    A blocked cluster never runs, so it has no progress message; its plan reasons (skew, a
    missing minor, a workload that cannot move) are what the operator needs to see. A cluster
    waiting for a decision (or that gave up) has one message: the failed step and its cause
    ("step 1/2 (...): timed out (...); last seen: ..."), whose cause comes last. Both get more
    room than a progress message, so the reason is not cut off.
    """
    message = str(cluster.get("message") or "")
    reasons = [str(r) for r in cluster.get("reasons") or ()]
    state = str(cluster.get("state", ""))
    if state == "Blocked" and reasons:
        text = "blocked: " + "; ".join(reasons) + (f" ({message})" if message else "")
        return _clip(text, 200)
    return _clip(message, 200 if state in _EXPLAINED_STATES else 80)


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def plan_namespace(kubeconfig: str, namespace: str | None) -> str:
    """The namespace the worker keeps calibration plans in (its plan-store RoleBinding's).

    ``--namespace`` when given (the fleet's one namespace, as before). Without it the worker
    calibrates every namespace, and the plans go to a namespace of the worker's own: in a pod
    (``IN_CLUSTER``), the pod's, read from the ServiceAccount's ``namespace`` file as client-go's
    in-cluster config does, so deploy/'s RoleBinding (in the ServiceAccount's namespace) always
    matches it, whatever namespace an overlay installs into; outside a pod ``default``, as
    before (docs/decisions.md, "The worker's plan namespace").
    """
    from orchestrator.kube.client import IN_CLUSTER, in_cluster_namespace

    if namespace:
        return namespace
    if kubeconfig == IN_CLUSTER:
        return in_cluster_namespace()
    return "default"


def calibration_input(target: str, selector: str | None, strategy: Path | None) -> CalibrationInput:
    """``calibrate``'s flags as the workflow input, checked before anything connects.

    The strategy file is read here; target, strategy and selector are parsed by the one request
    parser (``orchestrator.domain.request``), as the client, the workflow and the plan do.
    InputError on anything unusable.
    """
    from orchestrator.cli.files import read_document
    from orchestrator.domain.documents import load_document
    from orchestrator.domain.request import parse_calibration_request
    from workflows.model import CalibrationInput

    document = None
    if strategy is not None:
        document = load_document(read_document(strategy, "strategy"), "strategy")
    parse_calibration_request(target, document, selector)
    return CalibrationInput(target=target, strategy=document, selector=selector)


def register(app: typer.Typer) -> None:
    """Add the Temporal commands to the main app."""

    @app.command()
    @connection_options
    def worker(
        kubeconfig: KubeconfigOpt = None,
        context: ContextOpt = None,
        namespace: Annotated[
            str | None, typer.Option("--namespace", help="Only this CAPI namespace.")
        ] = None,
        temporal: ConnectionFlags = FROM_ENVIRONMENT,
        metrics_address: MetricsAddressOpt = None,
        health_address: HealthAddressOpt = None,
        placement_rounds: Annotated[
            int | None,
            typer.Option(
                "--placement-rounds",
                min=1,
                max=16,
                help="Re-placement rounds (read, place, write) this worker runs at once, 1 to "
                "16 (default: 4; docs/observability.md, calibrator_placement_phase_seconds).",
            ),
        ] = None,
    ) -> None:
        """Run the calibration worker against a management cluster (Ctrl-C stops it).

        Serves Prometheus metrics and /livez, /readyz (docs/observability.md); traces when
        OTEL_* variables say so.
        """
        from orchestrator.kube.backend.fleet import KubeFleetBackend
        from orchestrator.kube.backend.port import NotFoundError
        from workflows.activities.placement import PLACEMENT_ROUNDS_AT_ONCE
        from workflows.worker import run_worker

        connection = resolve(temporal)  # bad connection settings fail before anything starts
        telemetry = worker_telemetry(metrics_address)
        health = worker_health(health_address)
        backend: KubeFleetBackend | None = None
        try:
            config = kubeconfig_path(kubeconfig)
            plans = plan_namespace(config, namespace)
            # The worker's one watch-fed cache of the fleet, shared by every activity (issue 29);
            # the one-shot commands build theirs without one and LIST.
            backend = KubeFleetBackend.from_kubeconfig(
                config,
                context,
                namespace=namespace,
                plan_namespace=plans,
                tracer=telemetry.tracer,
                cache=True,
            )
            try:
                backend.check_api()
            except NotFoundError as err:
                fail(str(err))
            backend.start()  # LISTs and watches in the background; the first read waits

            async def main() -> None:
                client = await _client(
                    temporal, runtime=telemetry.runtime, interceptors=telemetry.interceptors
                )
                from rich.console import Console

                Console(stderr=True).print(
                    f"worker connected to {connection.describe()}; "
                    f"fleet: {f'namespace {namespace}' if namespace else 'all namespaces'}, "
                    f"plans in namespace {plans}; {telemetry.describe()}; "
                    f"health: {_health_url(health)}; Ctrl-C to stop"
                )
                rounds = PLACEMENT_ROUNDS_AT_ONCE if placement_rounds is None else placement_rounds
                await run_worker(client, backend, health=health, placement_rounds=rounds)

            with contextlib.suppress(KeyboardInterrupt):
                _run(main())
        finally:
            if backend is not None:
                backend.close()  # the cache's watches end with the worker
            if health is not None:
                health.close()
            telemetry.close()

    @app.command()
    @connection_options
    def calibrate(
        target: Annotated[str, typer.Option("--target", "-t", help="Target Kubernetes version.")],
        selector: Annotated[
            str | None, typer.Option("--selector", "-l", help="Label selector.")
        ] = None,
        strategy: Annotated[
            Path | None, typer.Option("--strategy", help="CalibrationStrategy YAML.")
        ] = None,
        wait: Annotated[
            bool, typer.Option(help="Follow live progress until the run ends.")
        ] = False,
        temporal: ConnectionFlags = FROM_ENVIRONMENT,
        output: OutputOpt = Format.table,
    ) -> None:
        """Start a FleetCalibration (a worker must be running).

        With --wait: exit 0 only when the run Completed with every cluster upgraded (or already
        up to date); 4 when it Failed, 5 when it was Aborted, 6 when it left clusters blocked,
        skipped or not started (README, "Exit status").
        """
        from orchestrator.cli.files import clip_message
        from orchestrator.domain.errors import InputError
        from workflows.client import start_calibration
        from workflows.search_attribute_setup import MissingSearchAttributes

        try:  # bad input fails here, before anything connects or starts
            wanted = calibration_input(target, selector, strategy)
        except InputError as err:
            fail(clip_message(str(err)))

        tracing = client_tracing()

        async def main() -> tuple[dict[str, Any], str | None]:
            client = await _client(
                temporal, interceptors=[] if tracing is None else [tracing.interceptor]
            )
            try:
                handle = await start_calibration(client, wanted)
            except InputError as err:
                fail(clip_message(str(err)))
            except MissingSearchAttributes as err:  # the namespace is not set up: exit 1
                fail(str(err), code=1)
            if not wait:
                return {"calibrationId": handle.id, "target": target}, None
            return await follow_run(client, handle.id)

        try:
            doc, closed = _run(main())
        finally:
            if tracing is not None:
                tracing.shutdown()
        emit(doc, output, lambda con: con.print(doc if "calibrationId" in doc else renderable(doc)))
        if wait:
            _exit_with_outcome(doc, closed)

    def _control(make: Callable[[], Awaitable[T]]) -> T:
        from workflows.client import ControlError

        try:
            return _run(make())
        except ControlError as err:
            fail(str(err))

    @app.command()
    @connection_options
    def status(
        calibration_id: Annotated[str, typer.Argument(help="Calibration (workflow) id.")],
        wait: Annotated[
            bool, typer.Option(help="Follow live progress until the run ends.")
        ] = False,
        temporal: ConnectionFlags = FROM_ENVIRONMENT,
        output: OutputOpt = Format.table,
    ) -> None:
        """Show a calibration's stage / cluster / step states.

        With --wait, follow the run until it ends and exit as calibrate --wait does.
        """
        from workflows import client as wc

        async def main() -> tuple[dict[str, Any], str | None]:
            client = await _client(temporal)
            if wait:
                return await follow_run(client, calibration_id)
            return _progress_doc(await wc.status(client, calibration_id)), None

        doc, closed = _control(main)
        emit(doc, output, lambda con: con.print(renderable(doc)))
        if wait:
            _exit_with_outcome(doc, closed)

    @app.command()
    @connection_options
    def pause(
        calibration_id: str,
        reason: ReasonOpt = "",
        temporal: ConnectionFlags = FROM_ENVIRONMENT,
    ) -> None:
        """Stop starting new clusters and steps (running steps finish)."""
        _ack("pause", calibration_id, temporal, reason=reason)

    @app.command()
    @connection_options
    def resume(
        calibration_id: str,
        reason: ReasonOpt = "",
        temporal: ConnectionFlags = FROM_ENVIRONMENT,
    ) -> None:
        """Continue a paused calibration."""
        _ack("resume", calibration_id, temporal, reason=reason)

    @app.command()
    @connection_options
    def approve(
        calibration_id: str,
        stage: Annotated[str, typer.Option("--stage")],
        reason: ReasonOpt = "",
        temporal: ConnectionFlags = FROM_ENVIRONMENT,
    ) -> None:
        """Open a stage's approval gate."""
        _ack("approve", calibration_id, temporal, stage, reason=reason)

    @app.command()
    @connection_options
    def retry(
        calibration_id: str,
        cluster: Annotated[str, typer.Option("--cluster")],
        reason: ReasonOpt = "",
        temporal: ConnectionFlags = FROM_ENVIRONMENT,
    ) -> None:
        """Retry a cluster's failed step (it stays tainted until the step succeeds)."""
        _ack("retry", calibration_id, temporal, cluster, reason=reason)

    @app.command()
    @connection_options
    def skip(
        calibration_id: str,
        cluster: Annotated[str, typer.Option("--cluster")],
        reason: ReasonOpt = "",
        temporal: ConnectionFlags = FROM_ENVIRONMENT,
    ) -> None:
        """Skip a cluster (a touched cluster stays tainted)."""
        _ack("skip", calibration_id, temporal, cluster, reason=reason)

    @app.command()
    @connection_options
    def abort(
        calibration_id: str,
        reason: ReasonOpt = "",
        temporal: ConnectionFlags = FROM_ENVIRONMENT,
    ) -> None:
        """Stop the run at the next step boundary; mid-upgrade clusters stay tainted."""
        _ack("abort", calibration_id, temporal, reason=reason)

    def _ack(
        command: str,
        calibration_id: str,
        temporal: ConnectionFlags,
        *args: str,
        reason: str,
    ) -> None:
        # By name: importing workflows.client (Temporal) costs over a second, which every
        # other command (drift, plan, place...) would pay at start-up if it happened here.
        from workflows import client as wc

        call: Callable[..., Awaitable[Any]] = getattr(wc, command)

        async def main() -> dict[str, Any]:
            client = await _client(temporal)
            ack = await call(client, calibration_id, *args, reason=reason)
            doc: dict[str, Any] = json.loads(json.dumps(asdict(ack), default=str))
            return doc

        from rich.console import Console

        Console().print(_control(main))


def _exit_with_outcome(doc: dict[str, Any], closed: str | None) -> None:
    """After the final document: exit with ``outcome.run_outcome``'s status and stderr line."""
    from orchestrator.cli.outcome import run_outcome

    code, why = run_outcome(doc, closed)
    if code:
        sys.stderr.write(f"{why}\n")
        raise SystemExit(code)


# Seconds between two polls of a followed run (tests set 0).
POLL_SECONDS = 2.0


async def follow(
    client: Any,
    calibration_id: str,
    timeout: float = 3600,
    stop_when_blocked: bool = False,
    stream: IO[str] | None = None,
) -> dict[str, Any]:
    """Follow the run until it ends; the final progress document (``follow_run``'s)."""
    doc, _ = await follow_run(client, calibration_id, timeout, stop_when_blocked, stream)
    return doc


async def follow_run(
    client: Any,
    calibration_id: str,
    timeout: float = 3600,
    stop_when_blocked: bool = False,
    stream: IO[str] | None = None,
) -> tuple[dict[str, Any], str | None]:
    """Show progress until the workflow ends; the final document and its close status.

    Progress goes to ``stream`` (default stderr). On a terminal it is a live table, redrawn in
    place; anywhere else (a CI log, ``> file``) it is one plain line per change, never wrapped
    or redrawn (``ProgressLines``), since a redraw there is a new copy of the table at 80
    columns with words broken across lines. The final table is the caller's to print once.

    With ``stop_when_blocked`` it also returns when the run needs an operator (Halted or
    AwaitingDecisions), with None as the status: the clusters stay tainted and the workflow
    keeps waiting for ``calibrator skip/abort`` or a retry.
    """
    import asyncio

    from workflows import client as wc

    out = sys.stderr if stream is None else stream
    handle = client.get_workflow_handle(calibration_id)
    deadline = time.monotonic() + timeout
    doc = _progress_doc(await wc.status(client, calibration_id))
    with _progress_view(out, doc) as show:
        while time.monotonic() < deadline:
            desc = await handle.describe()
            doc = _progress_doc(await wc.status(client, calibration_id))
            show(doc)
            if desc.status is not None and desc.status.name != "RUNNING":
                return doc, str(desc.status.name)
            if stop_when_blocked and doc.get("phase") in ("Halted", "AwaitingDecisions"):
                return doc, None
            await asyncio.sleep(POLL_SECONDS)
    fail(f"calibration {calibration_id} still running after {timeout:.0f}s", code=1)


@contextlib.contextmanager
def _progress_view(
    stream: IO[str], doc: dict[str, Any]
) -> Iterator[Callable[[dict[str, Any]], None]]:
    """A live table on a terminal, else ``ProgressLines``; yields the function that shows a doc."""
    if not stream.isatty():
        lines = ProgressLines(stream)
        lines.show(doc)
        yield lines.show
        return
    from rich.console import Console
    from rich.live import Live

    with Live(renderable(doc), refresh_per_second=2, console=Console(file=stream)) as live:
        yield lambda d: live.update(renderable(d))


class ProgressLines:
    """Progress of a run as plain lines: the run's line and each cluster's, when they change.

    ``cal-1 -> v1.35.0: Running (3 clusters: 1 Running, 2 Pending) stage prod``, then
    ``cal-1 demo-prod-1: Running: step 1/2 ...``. Nothing is repeated while it stays the same,
    and nothing is wrapped, so a log of a long run stays short and greppable.
    """

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream
        self._run = ""
        self._clusters: dict[str, str] = {}

    def show(self, doc: dict[str, Any]) -> None:
        """Write the lines of what changed since the last document shown."""
        run_id = doc.get("calibration_id", "")
        head = f"{run_id} -> {doc.get('target', '')}: {doc.get('phase', '')}"
        if doc.get("paused"):
            head += " (paused)"
        counts = doc.get("counts") or {}
        if counts:
            total = doc.get("total_clusters") or sum(counts.values())
            head += f" ({total} clusters: " + ", ".join(
                f"{n} {state}" for state, n in sorted(counts.items())
            )
            head += ")"
        if doc.get("message"):
            head += f" {_one_line(str(doc['message']))}"
        lines = [head] if head != self._run else []
        self._run = head
        for c in doc.get("clusters") or ():
            text = f"{c.get('state', '')}: {_one_line(row_message(c))}".rstrip(": ")
            if self._clusters.get(c["name"]) != text:
                self._clusters[c["name"]] = text
                lines.append(f"{run_id} {c['name']}: {text}")
        if lines:
            self.stream.write("".join(f"{line}\n" for line in lines))
            self.stream.flush()


def _one_line(text: str) -> str:
    return " ".join(text.split())
