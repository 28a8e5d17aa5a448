"""Fleet rollout strategy and waves (pure), after AKS Fleet update runs and GKE rollout sequencing.

A strategy is: an optional canary, then stages in order; a stage holds groups that roll in
parallel, each at most ``maxConcurrency`` clusters at a time; after a stage the run soaks, and a
stage can require an approval before it starts. Maintenance windows say when a cluster may start
a step; the workflow asks ``MaintenanceWindow.is_open(now)`` with its own deterministic clock.
The same inputs always give the same waves: clusters are ordered by name inside a group.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Final, Literal

from orchestrator.domain.documents import load_document, quote
from orchestrator.domain.durations import format_duration, parse_duration
from orchestrator.domain.errors import InputError
from orchestrator.domain.selectors import LabelSelector, selector_from_mapping
from orchestrator.domain.snapshot import Cluster
from orchestrator.domain.strict import boolean, check_fields, integer

CANARY_LABEL = "calibrator.dev/canary"
DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")


class StrategyError(InputError):
    """A strategy file that cannot be used."""


FindingAction = Literal["block", "warn"]
FINDING_ACTIONS: Final[tuple[FindingAction, ...]] = ("block", "warn")


@dataclass(frozen=True, slots=True)
class MaintenanceWindow:
    """Weekly window in UTC: on ``days`` from ``start_minute`` for ``duration_seconds``.

    A window may run past midnight; it then stays open into the next day. ``selector`` says
    which clusters the strategy's window applies to; a planned cluster's window (in the rollout
    and the workflow payload) is the one that matched it, and only its times matter there.
    """

    days: tuple[int, ...]
    start_minute: int
    duration_seconds: int
    selector: LabelSelector = LabelSelector()

    def is_open(self, at: datetime) -> bool:
        """Is ``at`` (timezone-aware) inside the window?"""
        return self.opening_at_or_before(at) is not None

    def opening_at_or_before(self, at: datetime) -> datetime | None:
        """Start of the window occurrence that contains ``at``, or None."""
        at = _utc(at)
        for back in range(0, 8):
            day = (at - timedelta(days=back)).replace(hour=0, minute=0, second=0, microsecond=0)
            if day.weekday() not in self.days:
                continue
            start = day + timedelta(minutes=self.start_minute)
            if start <= at < start + timedelta(seconds=self.duration_seconds):
                return start
        return None

    def next_opening(self, after: datetime) -> datetime:
        """When the window next opens at or after ``after`` (now, if it is open)."""
        after = _utc(after)
        if self.is_open(after):
            return after
        for ahead in range(0, 8):
            day = (after + timedelta(days=ahead)).replace(hour=0, minute=0, second=0, microsecond=0)
            start = day + timedelta(minutes=self.start_minute)
            if day.weekday() in self.days and start >= after:
                return start
        raise StrategyError("maintenance window never opens")  # pragma: no cover - days non-empty

    def describe(self) -> str:
        """``Sat,Sun 02:00 UTC for 4h``."""
        days = ",".join(DAYS[d] for d in self.days)
        hh, mm = divmod(self.start_minute, 60)
        return f"{days} {hh:02d}:{mm:02d} UTC for {format_duration(self.duration_seconds)}"


def _utc(at: datetime) -> datetime:
    if at.tzinfo is None:
        raise StrategyError("maintenance windows need timezone-aware times")
    return at.astimezone(UTC)


@dataclass(frozen=True, slots=True)
class GroupSpec:
    """Clusters of a stage that roll in parallel with the stage's other groups."""

    name: str
    selector: LabelSelector = LabelSelector()


@dataclass(frozen=True, slots=True)
class StageSpec:
    """A stage: groups, concurrency per group, soak after, approval gate before."""

    name: str
    selector: LabelSelector = LabelSelector()
    groups: tuple[GroupSpec, ...] = ()
    max_concurrency: int = 1
    soak_seconds: int = 0
    approval: bool = False


@dataclass(frozen=True, slots=True)
class CanarySpec:
    """The first clusters to go: selected by label, at most ``max_clusters``, then a soak."""

    selector: LabelSelector
    max_clusters: int = 1
    soak_seconds: int = 0
    approval_after: bool = False


@dataclass(frozen=True, slots=True)
class Strategy:
    """How a calibration rolls across the fleet."""

    canary: CanarySpec | None = CanarySpec(LabelSelector(((CANARY_LABEL, "true"),)))
    stages: tuple[StageSpec, ...] = (StageSpec("fleet"),)
    windows: tuple[MaintenanceWindow, ...] = ()
    max_failures: int = 0
    # Pre-releases as intermediate control-plane steps (``allowPrereleases``); the target may
    # always be one. Off by default: an ``-rc`` in a ClusterClass list is for testing, not a path.
    allow_prereleases: bool = False
    # What an observed finding does to its cluster's step (``observedUsage``): a client seen
    # calling an API the path removes, and (``unsatisfiableDisruptionBudgets``) a
    # PodDisruptionBudget no eviction can satisfy on a cluster whose workers roll. Block by
    # default: an upgrade that breaks a live client, or a drain that can never finish, is the
    # outage the check exists to prevent; "warn" is the operator's informed override (a client
    # already being retired, a PDB the app team relaxes during the window).
    observed_usage: FindingAction = "block"
    unsatisfiable_disruption_budgets: FindingAction = "block"

    def window_for(self, cluster: Cluster) -> MaintenanceWindow | None:
        """The first window whose selector matches the cluster (None = any time)."""
        for window in self.windows:
            if window.selector.matches(cluster.labels):
                return window
        return None


DEFAULT_STRATEGY = Strategy()


@dataclass(frozen=True, slots=True)
class Group:
    """A planned group: its clusters split into waves of at most maxConcurrency."""

    name: str
    waves: tuple[tuple[str, ...], ...]


@dataclass(frozen=True, slots=True)
class Stage:
    """A planned stage (the canary is a stage named ``canary``)."""

    name: str
    groups: tuple[Group, ...]
    max_concurrency: int
    soak_seconds: int
    approval: bool

    @property
    def clusters(self) -> tuple[str, ...]:
        """Every cluster of the stage in wave order."""
        return tuple(n for wave in self.waves() for n in wave)

    def waves(self) -> tuple[tuple[str, ...], ...]:
        """Wave k of a stage = wave k of each group, since groups run side by side."""
        depth = max((len(g.waves) for g in self.groups), default=0)
        return tuple(
            tuple(n for g in self.groups if k < len(g.waves) for n in g.waves[k])
            for k in range(depth)
        )


@dataclass(frozen=True, slots=True)
class Rollout:
    """Stages in order plus the clusters no stage selected.

    Everything the run obeys beyond the per-cluster steps lives here (gates, soak, windows, the
    failure budget), so the preview and the workflow payload read one object.
    """

    stages: tuple[Stage, ...]
    unassigned: tuple[str, ...] = ()
    windows: Mapping[str, MaintenanceWindow] = field(default_factory=dict)
    max_failures: int = 0
    # What the gates before each patch do with what they observe (the strategy's
    # ``observedUsage`` and ``unsatisfiableDisruptionBudgets``): the run's copy of the choice
    # the preview made its verdicts with.
    observed_usage: FindingAction = "block"
    unsatisfiable_disruption_budgets: FindingAction = "block"

    def waves(self) -> list[list[str]]:
        """Flat list of waves, canary first: the ``waves`` field of the plan JSON."""
        return [list(w) for stage in self.stages for w in stage.waves()]


def _chunks(names: Sequence[str], size: int) -> tuple[tuple[str, ...], ...]:
    return tuple(tuple(names[i : i + size]) for i in range(0, len(names), size))


def build_rollout(clusters: Iterable[Cluster], strategy: Strategy = DEFAULT_STRATEGY) -> Rollout:
    """Assign the given clusters (those that need an upgrade) to canary, stages, groups and waves.

    Approval gates are decided here and only here: a stage's own ``approval``, and the canary's
    ``approvalAfter`` as a gate on the first stage that follows the canary (none when no canary
    cluster was picked, or when no stage follows). The preview and the workflow read
    ``Stage.approval`` as it is, so what ``calibrator plan`` shows is what the run enforces.
    """
    everything = sorted(clusters, key=lambda c: c.name)
    pending = list(everything)
    stages: list[Stage] = []
    gate_next = False
    if strategy.canary is not None:
        picked = [c for c in pending if strategy.canary.selector.matches(c.labels)]
        picked = picked[: strategy.canary.max_clusters]
        if picked:
            names = tuple(c.name for c in picked)
            stages.append(
                Stage(
                    "canary",
                    (Group("canary", _chunks(names, len(names))),),
                    len(names),
                    strategy.canary.soak_seconds,
                    False,
                )
            )
            chosen = set(names)
            pending = [c for c in pending if c.name not in chosen]
            gate_next = strategy.canary.approval_after
    for spec in strategy.stages:
        in_stage = [c for c in pending if spec.selector.matches(c.labels)]
        taken: set[str] = set()
        groups: list[Group] = []
        for group in spec.groups or (GroupSpec(spec.name),):
            members = [
                c.name for c in in_stage if c.name not in taken and group.selector.matches(c.labels)
            ]
            taken.update(members)
            if members:
                groups.append(Group(group.name, _chunks(members, spec.max_concurrency)))
        if groups:
            stages.append(
                Stage(
                    spec.name,
                    tuple(groups),
                    spec.max_concurrency,
                    spec.soak_seconds,
                    spec.approval or gate_next,
                )
            )
            gate_next = False
        pending = [c for c in pending if c.name not in taken]
    windows: dict[str, MaintenanceWindow] = {}
    for cluster in everything:
        window = strategy.window_for(cluster)
        if window is not None:
            windows[cluster.name] = window
    return Rollout(
        tuple(stages),
        tuple(c.name for c in pending),
        windows,
        strategy.max_failures,
        strategy.observed_usage,
        strategy.unsatisfiable_disruption_budgets,
    )


# ------------------------------------------------------------------------------------------
# Strategy file
# ------------------------------------------------------------------------------------------


API_VERSION = "calibrator.dev/v1alpha1"
KIND = "CalibrationStrategy"
MAX_CONCURRENCY = 10_000
MAX_FAILURES = 1_000_000
MAX_NAME_LENGTH = 253


def _selector(raw: object, where: str) -> LabelSelector:
    try:
        return selector_from_mapping(raw, where)
    except InputError as err:
        raise StrategyError(str(err)) from None


def _fields(raw: object, allowed: tuple[str, ...], where: str) -> Mapping[str, Any]:
    """``raw`` as a mapping with only ``allowed`` keys.

    A misspelt ``approvel`` must not silently drop an approval gate.
    """
    if not isinstance(raw, Mapping):
        raise StrategyError(f"{where}: expected a mapping, got {quote(raw)}")
    check_fields(raw, allowed, where, StrategyError)
    return raw


def _bool(raw: object, where: str) -> bool:
    """A real boolean: ``approval: 'false'`` is a string, and must not turn a gate on."""
    return boolean(raw, where, StrategyError)


def _count(raw: object, where: str, minimum: int, maximum: int) -> int:
    return integer(raw, where, minimum, maximum, StrategyError)


def _name(raw: object, where: str) -> str:
    if not isinstance(raw, str) or not raw.strip() or len(raw) > MAX_NAME_LENGTH:
        raise StrategyError(
            f"{where}: needs a 'name' of 1 to {MAX_NAME_LENGTH} characters, got {quote(raw)}"
        )
    return raw


def _seconds(raw: object, where: str) -> int:
    try:
        return parse_duration(raw, where)
    except InputError as err:
        raise StrategyError(str(err)) from None


def _window(raw: object, where: str) -> MaintenanceWindow:
    data = _fields(raw, ("selector", "days", "start", "duration"), where)
    days_raw = data.get("days") or list(DAYS)
    if not isinstance(days_raw, list) or not days_raw:
        raise StrategyError(f"{where}.days: expected a list like [Sat, Sun]")
    days: list[int] = []
    for d in days_raw:
        if not isinstance(d, str) or d not in DAYS:
            raise StrategyError(f"{where}.days: unknown day {quote(d)} (use {', '.join(DAYS)})")
        if DAYS.index(d) in days:
            raise StrategyError(f"{where}.days: {d} is listed twice")
        days.append(DAYS.index(d))
    start = data.get("start")
    if not isinstance(start, str) or len(start) > 5 or len(start.split(":")) != 2:
        raise StrategyError(f"{where}.start: expected HH:MM (UTC), got {quote(start)}")
    hh, mm = start.split(":")
    if not (hh.isdigit() and mm.isdigit() and int(hh) < 24 and int(mm) < 60):
        raise StrategyError(f"{where}.start: expected HH:MM (UTC), got {quote(start)}")
    duration = _seconds(data.get("duration"), f"{where}.duration")
    if not 0 < duration <= 7 * 86400:
        raise StrategyError(f"{where}.duration: must be between 1s and 7d")
    return MaintenanceWindow(
        tuple(sorted(days)),
        int(hh) * 60 + int(mm),
        duration,
        _selector(data.get("selector"), f"{where}.selector"),
    )


def _stage(raw: object, where: str) -> StageSpec:
    s = _fields(raw, ("name", "selector", "groups", "maxConcurrency", "soak", "approval"), where)
    name = _name(s.get("name"), where)
    groups_raw = s.get("groups") or []
    if not isinstance(groups_raw, list):
        raise StrategyError(f"{where}.groups: expected a list")
    groups: list[GroupSpec] = []
    seen: set[str] = set()
    for j, g_raw in enumerate(groups_raw):
        here = f"{where}.groups[{j}]"
        g = _fields(g_raw, ("name", "selector"), here)
        group = _name(g.get("name"), here)
        if group in seen:
            raise StrategyError(f"{here}: duplicate group name {quote(group)}")
        seen.add(group)
        groups.append(GroupSpec(group, _selector(g.get("selector"), f"{here}.selector")))
    return StageSpec(
        name=name,
        selector=_selector(s.get("selector"), f"{where}.selector"),
        groups=tuple(groups),
        max_concurrency=_count(
            s.get("maxConcurrency", 1), f"{where}.maxConcurrency", 1, MAX_CONCURRENCY
        ),
        soak_seconds=_seconds(s.get("soak", 0), f"{where}.soak"),
        approval=_bool(s.get("approval", False), f"{where}.approval"),
    )


def strategy_from_mapping(raw: object) -> Strategy:
    """Validate a CalibrationStrategy document: every field known, typed and within bounds."""
    data = _fields(
        raw,
        (
            "apiVersion",
            "kind",
            "canary",
            "stages",
            "maintenanceWindows",
            "maxFailures",
            "allowPrereleases",
            "observedUsage",
            "unsatisfiableDisruptionBudgets",
        ),
        "strategy",
    )
    if data.get("apiVersion", API_VERSION) != API_VERSION:
        raise StrategyError(
            f"strategy.apiVersion: expected {API_VERSION}, got {quote(data.get('apiVersion'))}"
        )
    if data.get("kind", KIND) != KIND:
        raise StrategyError(f"strategy.kind: expected {KIND}, got {quote(data.get('kind'))}")
    canary: CanarySpec | None = None
    if data.get("canary") is not None:
        where = "strategy.canary"
        c = _fields(data["canary"], ("selector", "maxClusters", "soak", "approvalAfter"), where)
        canary = CanarySpec(
            _selector(c.get("selector"), f"{where}.selector"),
            _count(c.get("maxClusters", 1), f"{where}.maxClusters", 1, MAX_CONCURRENCY),
            _seconds(c.get("soak", 0), f"{where}.soak"),
            _bool(c.get("approvalAfter", False), f"{where}.approvalAfter"),
        )
    stages_raw = data.get("stages")
    if not isinstance(stages_raw, list) or not stages_raw:
        raise StrategyError("strategy.stages: expected a non-empty list")
    stages = [_stage(s, f"strategy.stages[{i}]") for i, s in enumerate(stages_raw)]
    names = [s.name for s in stages]
    if len(set(names)) != len(names) or "canary" in names:
        raise StrategyError("strategy.stages: stage names must be unique and not 'canary'")
    windows_raw = data.get("maintenanceWindows") or []
    if not isinstance(windows_raw, list):
        raise StrategyError("strategy.maintenanceWindows: expected a list")
    windows = tuple(
        _window(w, f"strategy.maintenanceWindows[{i}]") for i, w in enumerate(windows_raw)
    )
    max_failures = _count(data.get("maxFailures", 0), "strategy.maxFailures", 0, MAX_FAILURES)
    allow_prereleases = _bool(data.get("allowPrereleases", False), "strategy.allowPrereleases")
    return Strategy(
        canary,
        tuple(stages),
        windows,
        max_failures,
        allow_prereleases,
        observed_usage=_finding_action(
            data.get("observedUsage", "block"), "strategy.observedUsage"
        ),
        unsatisfiable_disruption_budgets=_finding_action(
            data.get("unsatisfiableDisruptionBudgets", "block"),
            "strategy.unsatisfiableDisruptionBudgets",
        ),
    )


def _finding_action(raw: object, where: str) -> FindingAction:
    """``block`` or ``warn``; anything else (null included) is an error, never a silent default."""
    if raw not in FINDING_ACTIONS:
        raise StrategyError(f"{where}: must be block or warn, got {quote(raw)}")
    return raw


def load_strategy(text: str | bytes) -> Strategy:
    """Parse a strategy YAML or JSON document (``documents.load_document`` rules)."""
    try:
        raw = load_document(text, "strategy")
    except InputError as err:
        raise StrategyError(str(err)) from None
    return strategy_from_mapping(raw)
