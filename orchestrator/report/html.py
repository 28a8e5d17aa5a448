"""The fleet report as one self-contained HTML page (pure: snapshot + plan + day -> string).

Who reads it: an operator deciding whether a calibration may start, usually from a CI artifact
or an e-mail attachment, often offline. Hence the constraints:

- One file, inline CSS, no script, no web font, no image: nothing to fetch, so it renders the
  same from a file share, an air-gapped laptop or a mail client. A Content-Security-Policy meta
  tag (``default-src 'none'``) makes the browser enforce that.
- Every string that comes from the snapshot, the strategy or the plan is escaped, including
  attribute values: cluster, label and pool names are user data.
- Readable at 1,000 clusters: one compact row per cluster, grouped by the ``env`` label, sticky
  column headers and cluster names, and names are never cut (no fixed widths, no ellipsis; the
  page scrolls instead).

Colours encode the upstream support status of a minor on the given day
(:mod:`orchestrator.domain.support`); the same status words appear in text so the page does not
depend on colour alone.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import date
from html import escape

from orchestrator.domain.calibration import CalibrationPlan
from orchestrator.domain.drift import ClusterDrift, drift_report
from orchestrator.domain.durations import format_duration
from orchestrator.domain.skew import max_kubelet_lag, worker_violation
from orchestrator.domain.snapshot import Cluster, FleetSnapshot
from orchestrator.domain.support import (
    SupportState,
    SupportStatus,
    release_dates,
    support_status,
)
from orchestrator.domain.upgradeplan import ClusterPlan
from orchestrator.domain.versions import KubeVersion, newest
from orchestrator.domain.waves import Stage

GROUP_LABEL = "env"
# Longer name lists and wave lists start folded (<details>, no script needed): at 1,000 clusters
# the "needs attention" section must stay one screen, the matrix below lists every name anyway.
FOLD_NAMES = 24
FOLD_WAVES = 60
NO_GROUP = "(no env label)"
Minor = tuple[int, int]

STATE_TEXT: dict[SupportState, str] = {
    "supported": "supported",
    "ending-soon": "ending soon (90 days or less)",
    "end-of-life": "end of life",
    "unknown": "not in the support calendar",
}

CSS = """
:root{--ok:#d3efd9;--soon:#fbe7b0;--eol:#f7c6c0;--unk:#e3e3e8;--ink:#1f2328;--mute:#59636e;
--line:#d0d7de;--blue:#0969da;--red:#b42318}
*{box-sizing:border-box}
body{font:13px/1.35 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;
color:var(--ink);margin:0;padding:16px 20px 40px;background:#fff}
h1{font-size:20px;margin:0 0 2px}
h2{font-size:16px;margin:26px 0 8px;padding-bottom:4px;border-bottom:1px solid var(--line)}
h3{font-size:13px;margin:12px 0 4px}
a{color:var(--blue);text-decoration:none}
.meta,.note{color:var(--mute)}
nav{margin:10px 0}
nav a{margin-right:14px}
.cards{display:flex;flex-wrap:wrap;gap:8px;margin:12px 0}
.card{border:1px solid var(--line);border-radius:6px;padding:5px 10px;min-width:96px}
.card b{display:block;font-size:18px}
.card.bad b{color:var(--red)}
.legend{margin:6px 0}
.legend span{display:inline-block;padding:1px 8px;margin:0 6px 4px 0;border:1px solid var(--line);
border-radius:3px}
.st-supported{background:var(--ok)}
.st-ending-soon{background:var(--soon)}
.st-end-of-life{background:var(--eol)}
.st-unknown{background:var(--unk)}
ul.flat{margin:2px 0 8px;padding-left:18px}
.names{display:flex;flex-wrap:wrap;gap:2px 10px;margin:2px 0 8px;padding:0;list-style:none}
.names li,.cn{white-space:nowrap}
summary{cursor:pointer;color:var(--blue);margin:2px 0 6px}
.eol{margin:4px 0}
.eol details,.eol .names{margin-left:36px}
.badge{display:inline-block;padding:0 6px;border:1px solid var(--line);border-radius:3px}
.card.warn b{color:#9a6700}
table{border-collapse:separate;border-spacing:0}
.matrix th,.matrix td{padding:1px 6px;border-bottom:1px solid #eaeef2;white-space:nowrap;
height:19px;text-align:left;vertical-align:middle}
.matrix thead th{position:sticky;top:0;z-index:2;background:#f6f8fa;vertical-align:bottom;
border-bottom:1px solid var(--line);font-weight:600}
.matrix thead th small{display:block;font-weight:400;color:var(--mute)}
.matrix th.name{position:sticky;left:0;z-index:1;background:#fff;font-weight:500}
.matrix thead th.name{z-index:3;background:#f6f8fa}
.matrix tr.group th{background:#eef1f4;font-weight:600;padding-top:6px}
.matrix tr.skew th.name{box-shadow:inset 3px 0 0 var(--red)}
.matrix .target{box-shadow:inset 2px 0 0 var(--blue),inset -2px 0 0 var(--blue)}
.matrix td.path{color:var(--blue);text-align:center}
.chip{font:12px ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;margin-right:6px}
.chip.cp{font-weight:700}
.chip.bad{color:var(--red);font-weight:700}
.chip.edge{color:#9a6700;font-weight:700}
.s-current{color:#1a7f37}.s-behind{color:#9a6700}.s-ahead{color:var(--blue)}
.s-skewed,.s-end-of-life,.blocked{color:var(--red);font-weight:600}
ol.stages{list-style:none;padding:0;margin:0}
.stage{border-left:3px solid var(--blue);padding:2px 0 8px 12px;margin:0 0 10px}
.gate{color:#8250df;font-weight:600;margin:2px 0}
ol.waves{display:flex;flex-wrap:wrap;gap:6px;list-style:none;padding:0;margin:4px 0}
.wave{border:1px solid var(--line);border-radius:4px;padding:2px 6px;background:#f6f8fa}
.wave .wn{font-weight:700;color:var(--blue);margin-right:6px}
table.blocked-list td,table.blocked-list th{border-bottom:1px solid #eaeef2;padding:3px 8px;
vertical-align:top;text-align:left}
table.blocked-list td.cn{font-weight:600}
"""


def _e(value: object) -> str:
    """Escape for text and for double-quoted attribute values alike."""
    return escape(str(value), quote=True)


def _minor_text(key: Minor) -> str:
    return f"{key[0]}.{key[1]}"


def _minor_status(key: Minor, today: date) -> SupportStatus:
    return support_status(KubeVersion(key[0], key[1], 0), today)


def _count(n: int, noun: str) -> str:
    """``1 cluster`` / ``3 clusters``."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _anchor(name: str) -> str:
    return "c-" + _e(name)


def _components(cluster: Cluster) -> list[tuple[str, KubeVersion]]:
    """("CP", version) then (pool name, version) for every pool, as shown in the matrix."""
    return [("CP", cluster.control_plane.version)] + [
        (md.name, md.version) for md in cluster.machine_deployments
    ]


def minor_columns(snapshot: FleetSnapshot, target: KubeVersion) -> list[Minor]:
    """Every minor from the oldest running component up to the newest of target / available.

    Gaps are filled (a fleet on 1.31 and 1.35 still shows 1.32-1.34) because the control plane
    visits each of them on the way; another major (none exists yet) just adds its own minors.
    """
    keys = {target.minor_key}
    for cluster in snapshot.clusters:
        keys.update(v.minor_key for _, v in _components(cluster))
    top = newest(snapshot.available_versions)
    if top is not None:
        keys.add(top.minor_key)
    out: set[Minor] = set()
    for major in {k[0] for k in keys}:
        minors = [k[1] for k in keys if k[0] == major]
        out.update((major, m) for m in range(min(minors), max(minors) + 1))
    return sorted(out)


def _pool_mark(pool: str, version: KubeVersion, control_plane: KubeVersion) -> str:
    """CSS class for a worker chip: "bad" breaks the kubelet skew rule, "edge" sits on its limit."""
    if worker_violation(pool, version, control_plane) is not None:
        return " bad"
    if control_plane.minor - version.minor == max_kubelet_lag(version):
        return " edge"
    return ""


def _oldest(cluster: Cluster) -> KubeVersion:
    return min(v for _, v in _components(cluster))


def _head(title: str) -> str:
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta http-equiv="Content-Security-Policy" '
        "content=\"default-src 'none'; style-src 'unsafe-inline'\">"
        f"<title>{_e(title)}</title><style>{CSS}</style></head><body>"
    )


def _legend() -> str:
    items = "".join(
        f'<span class="st-{state}">{_e(text)}</span>' for state, text in STATE_TEXT.items()
    )
    return (
        f'<div class="legend">Support status of a minor: {items}'
        '<span class="target">target column</span>'
        "<span>→ planned control-plane step</span>"
        '<span><b class="chip bad">pool</b> breaks kubelet skew</span>'
        '<span><b class="chip edge">pool</b> at the skew limit</span></div>'
    )


def _cards(rows: Sequence[ClusterDrift], plan: CalibrationPlan, today: date) -> str:
    counts: dict[str, int] = defaultdict(int)
    for d in rows:
        counts[d.status] += 1
    eol = sum(1 for d in rows if d.support.state == "end-of-life")
    blocked = sum(1 for p in plan.clusters if p.blocked)
    target_state = support_status(plan.target, today).state
    target_tone = {"supported": "", "end-of-life": "bad"}.get(target_state, "warn")
    cards = [
        ("Clusters", str(len(rows)), ""),
        ("Target", str(plan.target), ""),
        ("Target support", STATE_TEXT[target_state], target_tone),
        ("At target", str(counts["current"]), ""),
        ("Behind", str(counts["behind"]), ""),
        ("Skewed", str(counts["skewed"]), "bad" if counts["skewed"] else ""),
        ("End of life", str(eol), "bad" if eol else ""),
        ("Blocked", str(blocked), "bad" if blocked else ""),
        ("Waves", str(len(plan.rollout.waves())), ""),
    ]
    html = "".join(
        f'<div class="card {tone}"><span class="meta">{_e(label)}</span><b>{_e(value)}</b></div>'
        for label, value, tone in cards
    )
    return f'<div class="cards">{html}</div>'


def _name_list(names: Sequence[str]) -> str:
    items = "".join(f'<li><a href="#{_anchor(n)}">{_e(n)}</a></li>' for n in names)
    if len(names) <= FOLD_NAMES:
        return f'<ul class="names">{items}</ul>'
    return f'<details><summary>show the names</summary><ul class="names">{items}</ul></details>'


def _attention(rows: Sequence[ClusterDrift], today: date) -> str:
    out = ['<section id="attention"><h2>Needs attention</h2>']
    skewed = [d for d in rows if d.skew_violations]
    out.append(f"<h3>Version skew ({_count(len(skewed), 'cluster')})</h3>")
    if skewed:
        out.append('<ul class="flat">')
        for d in skewed:
            name = d.cluster.name
            out.append(
                f'<li><a class="cn" href="#{_anchor(name)}">{_e(name)}</a>: '
                f"{_e('; '.join(d.skew_violations))}</li>"
            )
        out.append("</ul>")
    else:
        out.append('<p class="note">No cluster breaks the version skew policy.</p>')
    edge = [
        d.cluster.name
        for d in rows
        if not d.skew_violations
        and any(
            _pool_mark(md.name, md.version, d.cluster.control_plane.version) == " edge"
            for md in d.cluster.machine_deployments
        )
    ]
    if edge:
        out.append(
            f"<h3>Workers at the kubelet skew limit ({_count(len(edge), 'cluster')}): the next "
            "control-plane step must bring them along</h3>"
        )
        out.append(_name_list(edge))
    by_minor: dict[tuple[SupportState, Minor], list[str]] = defaultdict(list)
    for d in rows:
        if d.support.state in ("end-of-life", "ending-soon", "unknown"):
            by_minor[(d.support.state, _oldest(d.cluster).minor_key)].append(d.cluster.name)
    order: dict[SupportState, int] = {"end-of-life": 0, "ending-soon": 1, "unknown": 2}
    eol_total = sum(len(v) for (s, _), v in by_minor.items() if s == "end-of-life")
    out.append(
        f"<h3>End of upstream support ({_count(eol_total, 'cluster')} past end of life)</h3>"
    )
    if not by_minor:
        out.append('<p class="note">Every running minor is supported for 90 days or more.</p>')
    for (state, key), names in sorted(by_minor.items(), key=lambda kv: (order[kv[0][0]], kv[0][1])):
        status = _minor_status(key, today)
        out.append(
            f'<div class="eol"><b class="badge st-{state}">{_e(_minor_text(key))}</b> '
            f"{_e(status.describe())}: {_count(len(names), 'cluster')} "
            f"(by their oldest component){_name_list(names)}</div>"
        )
    out.append("</section>")
    return "".join(out)


def _matrix(
    rows: Sequence[ClusterDrift],
    plan: CalibrationPlan,
    columns: Sequence[Minor],
    wave_of: dict[str, str],
    today: date,
) -> str:
    released = release_dates()
    target_key = plan.target.minor_key
    plans = {p.cluster: p for p in plan.clusters}
    head = ['<th class="name" scope="col">Cluster</th><th scope="col">Status</th>']
    for key in columns:
        status = _minor_status(key, today)
        tip = f"{_minor_text(key)}: {status.describe()}"
        if key in released:
            tip += f"; released {released[key].isoformat()}"
        when = "" if status.end_of_life is None else f"EOL {status.end_of_life.isoformat()}"
        mark = " target" if key == target_key else ""
        head.append(
            f'<th scope="col" class="st-{status.state}{mark}" title="{_e(tip)}">'
            f"{_e(_minor_text(key))}{' target' if mark else ''}<small>{_e(when or 'no date')}"
            "</small></th>"
        )
    head.append('<th scope="col">Wave</th>')
    width = len(columns) + 3
    groups: dict[str, list[ClusterDrift]] = defaultdict(list)
    for d in rows:
        groups[d.cluster.labels.get(GROUP_LABEL, NO_GROUP)].append(d)
    body: list[str] = []
    for group in sorted(groups, key=lambda g: (g == NO_GROUP, g)):
        members = sorted(groups[group], key=lambda d: d.cluster.name)
        skewed = sum(1 for d in members if d.skew_violations)
        eol = sum(1 for d in members if d.support.state == "end-of-life")
        label = group if group == NO_GROUP else f"{GROUP_LABEL}={group}"
        body.append(
            f'<tbody><tr class="group"><th colspan="{width}">{_e(label)} · '
            f"{_count(len(members), 'cluster')} · {eol} end of life · {skewed} skewed</th></tr>"
        )
        for d in members:
            body.append(
                _matrix_row(
                    d,
                    plans.get(d.cluster.name),
                    columns=columns,
                    target_key=target_key,
                    wave_of=wave_of,
                    today=today,
                )
            )
        body.append("</tbody>")
    return (
        '<section id="matrix"><h2>Version matrix</h2>'
        '<p class="note">One row per cluster, grouped by the env label; a column per minor. '
        "Each cell lists the control plane (CP) and the worker pools running that minor, "
        "coloured by the minor's upstream support status.</p>"
        f'<table class="matrix"><thead><tr>{"".join(head)}</tr></thead>{"".join(body)}</table>'
        "</section>"
    )


def _matrix_row(
    d: ClusterDrift,
    cluster_plan: ClusterPlan | None,
    *,
    columns: Sequence[Minor],
    target_key: Minor,
    wave_of: dict[str, str],
    today: date,
) -> str:
    cluster = d.cluster
    cp = cluster.control_plane.version
    at: dict[Minor, list[str]] = defaultdict(list)
    at[cp.minor_key].append(f'<span class="chip cp">CP {_e(cp)}</span>')
    for md in cluster.machine_deployments:
        mark = _pool_mark(md.name, md.version, cp)
        at[md.version.minor_key].append(
            f'<span class="chip{mark}">{_e(md.name)} {_e(md.version)}</span>'
        )
    planned: dict[Minor, KubeVersion] = {}
    blocked = False
    if cluster_plan is not None:
        blocked = cluster_plan.blocked
        planned = {v.minor_key: v for v in cluster_plan.control_plane_steps}
    status = d.status + (" · blocked" if blocked else "")
    cells = [
        f'<th scope="row" class="name" id="{_anchor(cluster.name)}">{_e(cluster.name)}</th>',
        f'<td class="s-{_e(d.status)}{" blocked" if blocked else ""}">{_e(status)}</td>',
    ]
    for key in columns:
        mark = " target" if key == target_key else ""
        if key in at:
            state = _minor_status(key, today).state
            cells.append(f'<td class="st-{state}{mark}">{"".join(at[key])}</td>')
        elif key in planned:
            step = planned[key]
            cells.append(
                f'<td class="path{mark}" title="planned control-plane step {_e(step)}">→</td>'
            )
        else:
            cells.append(f'<td class="{mark.strip()}"></td>' if mark else "<td></td>")
    cells.append(f"<td>{_e(wave_of.get(cluster.name, '-'))}</td>")
    row_class = ' class="skew"' if d.skew_violations else ""
    return f"<tr{row_class}>{''.join(cells)}</tr>"


def _stage_line(stage: Stage) -> str:
    parts = [_count(len(stage.clusters), "cluster"), f"maxConcurrency {stage.max_concurrency}"]
    if stage.soak_seconds:
        parts.append(f"soak {format_duration(stage.soak_seconds)} after")
    return " · ".join(parts)


def _waves(plan: CalibrationPlan) -> tuple[str, dict[str, str]]:
    """The timeline section and, per cluster, the label of its wave (for the matrix)."""
    wave_of: dict[str, str] = {}
    out = ['<section id="waves"><h2>Planned waves</h2>']
    if not plan.rollout.stages:
        out.append('<p class="note">No cluster needs an upgrade that can run.</p>')
    out.append('<ol class="stages">')
    number = 0
    for stage in plan.rollout.stages:
        out.append(
            f'<li class="stage"><div><b>{_e(stage.name)}</b> '
            f'<span class="meta">{_e(_stage_line(stage))}</span></div>'
        )
        if stage.approval:
            out.append('<div class="gate">◆ approval required before this stage starts</div>')
        windows = sorted(
            {
                plan.rollout.windows[n].describe()
                for n in stage.clusters
                if n in plan.rollout.windows
            }
        )
        if windows:
            out.append(f'<div class="meta">maintenance windows: {_e("; ".join(windows))}</div>')
        waves = stage.waves()
        if len(waves) > FOLD_WAVES:
            out.append(f"<details><summary>show all {len(waves)} waves</summary>")
        out.append('<ol class="waves">')
        for wave in waves:
            number += 1
            for name in wave:
                wave_of[name] = f"W{number} {stage.name}"
            names = ", ".join(f'<a class="cn" href="#{_anchor(n)}">{_e(n)}</a>' for n in wave)
            out.append(f'<li class="wave"><span class="wn">W{number}</span>{names}</li>')
        out.append("</ol></details></li>" if len(waves) > FOLD_WAVES else "</ol></li>")
    out.append("</ol>")
    if plan.rollout.unassigned:
        out.append(
            f"<h3>Not selected by any stage ({len(plan.rollout.unassigned)}): they will not be "
            "upgraded by this strategy</h3>"
        )
        out.append(_name_list(plan.rollout.unassigned))
        for name in plan.rollout.unassigned:
            wave_of[name] = "not in any stage"
    out.append("</section>")
    return "".join(out), wave_of


def _blocked(plan: CalibrationPlan) -> str:
    blocked = [p for p in plan.clusters if p.blocked]
    out = [f'<section id="blocked"><h2>Blocked clusters ({len(blocked)})</h2>']
    if not blocked:
        out.append('<p class="note">No cluster is blocked.</p></section>')
        return "".join(out)
    out.append(
        '<table class="blocked-list"><thead><tr><th>Cluster</th><th>From (CP / workers)</th>'
        "<th>Why it will not be upgraded</th></tr></thead><tbody>"
    )
    for p in blocked:
        reasons = "".join(f"<li>{_e(r)}</li>" for r in p.reasons)
        out.append(
            f'<tr><td class="cn"><a href="#{_anchor(p.cluster)}">{_e(p.cluster)}</a></td>'
            f"<td>{_e(p.control_plane_from)} / {_e(p.workers_from or '-')}</td>"
            f'<td><ul class="flat">{reasons}</ul></td></tr>'
        )
    out.append("</tbody></table></section>")
    return "".join(out)


def render_html(
    snapshot: FleetSnapshot, plan: CalibrationPlan, today: date, *, source: str = ""
) -> str:
    """The whole report page. ``today`` drives the support colours; ``source`` names the input."""
    drift = drift_report(snapshot, plan.target, today)
    rows = drift.clusters
    waves_html, wave_of = _waves(plan)
    for p in plan.clusters:
        if p.blocked:
            wave_of[p.cluster] = "blocked"
        elif not p.needs_upgrade:
            wave_of.setdefault(p.cluster, "at target")
    planned_names = {p.cluster for p in plan.clusters}
    for d in rows:
        if d.cluster.name not in planned_names:
            wave_of[d.cluster.name] = "not selected"
    title = f"Fleet report: {len(rows)} clusters to {plan.target}"
    origin = f" from {source}" if source else ""
    parts = [
        _head(title),
        f"<header><h1>{_e(title)}</h1>",
        f'<div class="meta">As of {_e(today.isoformat())} (UTC){_e(origin)}; newest available '
        f"version {_e(drift.newest or '-')}. Generated offline by calibrator report.</div>",
        _cards(rows, plan, today),
        _legend(),
        '<nav><a href="#attention">Needs attention</a><a href="#blocked">Blocked</a>'
        '<a href="#waves">Waves</a><a href="#matrix">Version matrix</a></nav></header>',
        _attention(rows, today),
        _blocked(plan),
        waves_html,
        _matrix(rows, plan, minor_columns(snapshot, plan.target), wave_of, today),
        '<footer><p class="note">Support dates: the Kubernetes release calendar bundled with '
        "calibrator (kubernetes.io/releases). Per-stage progress of a running calibration is not "
        "part of this offline report: it lives in Temporal (calibrator status).</p></footer>",
        "</body></html>\n",
    ]
    return "".join(parts)
