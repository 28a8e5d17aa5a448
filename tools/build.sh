#!/usr/bin/env bash
# Builds the real control-plane binaries the calibrator runs against
# (kube-apiserver, etcd, the Cluster API managers and CAPD) from pinned Go
# modules, through the Go module proxy, into a cache directory outside the
# repository; with --set pulumi, the Pulumi engine (pulumi CLI, Kubernetes
# provider plugin) instead.  See tools/README.md.
#
# Usage:
#   tools/build.sh              build if needed; the last stdout line is the bin dir
#   tools/build.sh --print-dir  print the bin dir for the current pins, build nothing
#   tools/build.sh [--set S] --cached-only
#                               the bin dir when that set is complete in the cache;
#                               otherwise exit 3, building nothing (CI runs a set's
#                               tests early when it is there already)
#   tools/build.sh --force      rebuild even if the cache dir is complete
#   tools/build.sh --set pulumi [--print-dir] [--force]
#                               the same for the Pulumi engine set instead: the
#                               pulumi CLI and the Kubernetes provider plugin
#                               (own pins, own cache dir; see README.md)
#   tools/build.sh --set kind [--print-dir] [--force]
#                               the kind CLI, a kind base image and node images,
#                               built from Debian packages and Go modules (needs
#                               root and a Docker engine; see README.md)
#   tools/build.sh --set haproxy [--print-dir] [--force]
#                               CAPD's load-balancer image from Debian's haproxy
#                               (needs root and the Debian mirror, no engine)
#   tools/build.sh --set capi-images [--print-dir] [--force]
#                               clusterctl, kustomize, the CAPI manager and cert-manager
#                               images, a clusterctl local repository (needs root and
#                               the control-plane set; no engine)
#   tools/build.sh --set worker [--print-dir] [--force]
#                               the worker image's base: Debian's python3 on a
#                               minbase root (root, Debian mirror, no engine);
#                               tools/worker/build-image.sh builds the worker on it
#
# Sets: control-plane (the default), pulumi, kind, haproxy, capi-images and worker.  Only the bin dir is written
# to stdout (progress goes to stderr), so both BIN=$(tools/build.sh) and
# BIN=$(tools/build.sh | tail -1) work.
#
# Environment:
#   CALIBRATOR_BIN_CACHE   cache root (default: $HOME/.cache/fleet-calibrator/bin)
#   CALIBRATOR_BUILD_NICE  niceness for the go commands (default: 10)
set -euo pipefail

# ---------------------------------------------------------------------------
# Pins.  Each must match what the wrapper module's go.mod requires (checked
# before building); bump both together (see README.md).
KUBERNETES_VERSION=v1.35.8     # tools/kube: k8s.io/kubernetes + 31 staging replaces at v0.35.8
ETCD_VERSION=v3.6.16           # tools/etcd: go.etcd.io/etcd/server/v3
CLUSTER_API_VERSION=v1.13.4    # tools/capi: sigs.k8s.io/cluster-api and sigs.k8s.io/cluster-api/test
# Bump when the way binaries are built changes (flags, names, manifest layout)
# without any module pin changing, to force a new cache key.
RECIPE_REVISION=1

# Pins of the pulumi set (tools/pulumi, tools/pulumi/kubernetes); they do not enter the control-plane
# cache key above, and the control-plane pins do not enter the pulumi one.
PULUMI_VERSION=v3.274.0        # github.com/pulumi/pulumi/pkg/v3 and sdk/v3 (must agree)
PULUMI_KUBERNETES_VERSION=v4.25.0  # pulumi-kubernetes release = github.com/pulumi/pulumi-kubernetes/sdk/v4 tag
# github.com/pulumi/pulumi-kubernetes/provider/v4 has no tags of its own: the
# proxy serves this pseudo-version, which is the commit tagged v4.25.0.
PULUMI_KUBERNETES_MODULE=v4.0.0-20260115033456-f47bc2d6f199
PULUMI_RECIPE_REVISION=2

# Pins of the kind set (tools/kind/*; see README.md, "The kind set"); own cache key again.
KIND_VERSION=v0.33.0               # sigs.k8s.io/kind: the kind CLI
KIND_NODE_VERSIONS=(v1.35.8 v1.34.12)  # one node image each; wrapper module tools/kind/k8s-<v1.MINOR>
# What kubeadm of each minor deploys (cmd/kubeadm/app/constants: DefaultEtcdVersion,
# CoreDNSVersion); wrapper modules tools/kind/etcd-v<VERSION> and tools/kind/coredns-<VERSION>.
declare -A KIND_ETCD_FOR=([v1.35]=3.6.6 [v1.34]=3.6.5)         # images registry.k8s.io/etcd:<v>-0
declare -A KIND_COREDNS_FOR=([v1.35]=v1.13.1 [v1.34]=v1.12.1)
KIND_PAUSE_VERSION=3.10.1          # kubeadm v1.34's and v1.35's pause (C source from k8s.io/kubernetes)
KIND_CNI_PLUGINS_VERSION=v1.8.0    # github.com/containernetworking/plugins
KIND_CRICTL_VERSION=v1.34.0        # sigs.k8s.io/cri-tools (v1.35.0 is not served here)
KIND_KUBE_ROUTER_VERSION=v2.1.0    # the pod network (newest kube-router/v2 served here)
KIND_DEBIAN_SUITE=bookworm
KIND_DEBIAN_MIRROR=${KIND_DEBIAN_MIRROR:-http://deb.debian.org/debian}
KIND_RECIPE_REVISION=4  # 3: etcd and CoreDNS per Kubernetes minor; 4: CoreDNS with a plugin subset
# The haproxy set (tools/kind/haproxy-set.sh): CAPD's load-balancer image, Debian's haproxy on
# KIND_DEBIAN_SUITE. CAPD names the image <imageRepository>/haproxy:<imageTag>; the docker
# ClusterClass (capi-templates/docker) sets repository and tag to these.
HAPROXY_IMAGE=fleet-calibrator/haproxy:bookworm-r2
HAPROXY_RECIPE_REVISION=2  # 2: maxconn within a 20000 open-file limit
# The capi-images set (tools/capi-images/build-set.sh): clusterctl, kustomize, helm, the manager
# and cert-manager images and a clusterctl local repository, for a kind management cluster.
# clusterctl uses CLUSTER_API_VERSION above; the images take the control-plane set's binaries.
CAPI_IMAGES_KUSTOMIZE_VERSION=v5.7.1     # sigs.k8s.io/kustomize/kustomize/v5 (v5.8.x needs go >= 1.27)
CAPI_IMAGES_HELM_VERSION=v3.19.5         # helm.sh/helm/v3: only renders cert-manager's chart
CAPI_IMAGES_CERT_MANAGER_VERSION=v1.11.5 # newest cert-manager whose mains are in its root module
CAPI_IMAGES_REPOSITORY=fleet-calibrator  # our images: fleet-calibrator/<upstream image name>:<version>
CAPI_IMAGES_RECIPE_REVISION=1
# The worker set (tools/worker/base-set.sh): the base of deploy/Dockerfile, Debian's python3 on
# KIND_DEBIAN_SUITE; the Dockerfile's default BASE names the same image (a unit test compares).
WORKER_BASE_IMAGE=fleet-calibrator/python:3.11-bookworm-r2
WORKER_RECIPE_REVISION=2  # 2: the standard library's bytecode valid in the layer (unchecked hashes)
# ---------------------------------------------------------------------------

TOOLS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE_ROOT=${CALIBRATOR_BIN_CACHE:-${HOME}/.cache/fleet-calibrator/bin}
NICE=${CALIBRATOR_BUILD_NICE:-10}
# Never let go.mod's "go" line trigger a toolchain download.
export GOTOOLCHAIN=${GOTOOLCHAIN:-local}
export CGO_ENABLED=0

BINARIES=(kube-apiserver etcd capi-manager kubeadm-bootstrap-manager kubeadm-control-plane-manager capd-manager)
# name -> "wrapper-module-subdir main-package"
declare -A BUILD_SPEC=(
  [kube-apiserver]="kube k8s.io/kubernetes/cmd/kube-apiserver"
  [etcd]="etcd go.etcd.io/etcd/server/v3"
  [capi-manager]="capi sigs.k8s.io/cluster-api"
  [kubeadm-bootstrap-manager]="capi sigs.k8s.io/cluster-api/bootstrap/kubeadm"
  [kubeadm-control-plane-manager]="capi sigs.k8s.io/cluster-api/controlplane/kubeadm"
  [capd-manager]="capi sigs.k8s.io/cluster-api/test/infrastructure/docker"
)
WRAPPER_MODULES=(kube etcd capi)

log() { printf '[tools/build.sh] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# one_layer_image ROOT TAG OUT SET CONFIG: a `docker save` archive (an image config and one layer)
# of the directory ROOT, tagged TAG, written to OUT without a Docker engine, for the sets whose
# images are a root filesystem and nothing else (haproxy, worker, capi-images). Entries are
# sorted, owners numeric and mtimes 0, so the same ROOT gives the same image ID. CONFIG is the
# image's "config" object (Env, Entrypoint, User, ...) as JSON.
one_layer_image() {
  local root=$1 tag=$2 out=$3 set=$4 image_config=$5 d layer_sha config config_sha
  local created=1970-01-01T00:00:00Z
  d=$(mktemp -d "$CACHE_ROOT/.tmp-$set-img.XXXXXX")
  tar -C "$root" --numeric-owner --sort=name --mtime=@0 -cf "$d/layer.tar" . \
    || die "[$set] tar of $root failed"
  layer_sha=$(sha256sum "$d/layer.tar" | cut -d' ' -f1)
  mkdir -p "$d/$layer_sha"
  mv "$d/layer.tar" "$d/$layer_sha/layer.tar"
  config=$(printf '{"architecture":"%s","os":"linux","created":"%s","config":%s,"rootfs":{"type":"layers","diff_ids":["sha256:%s"]},"history":[{"created":"%s","created_by":"tools/build.sh --set %s"}]}' \
    "$(go env GOARCH)" "$created" "$image_config" "$layer_sha" "$created" "$set")
  config_sha=$(printf '%s' "$config" | sha256sum | cut -d' ' -f1)
  printf '%s' "$config" >"$d/$config_sha.json"
  printf '[{"Config":"%s.json","RepoTags":["%s"],"Layers":["%s/layer.tar"]}]' \
    "$config_sha" "$tag" "$layer_sha" >"$d/manifest.json"
  printf '{"%s":{"%s":"%s"}}' "${tag%:*}" "${tag##*:}" "$config_sha" >"$d/repositories"
  tar -C "$d" -cf "$out" manifest.json repositories "$config_sha.json" "$layer_sha" \
    || die "[$set] writing $out failed"
  rm -rf "$d"
}

# --cached-only: a set whose cache dir is not complete says so and exits 3, building nothing.
cached_only_exit() {
  [[ $MODE == cached-only ]] || return 0
  log "not cached: $1"
  exit 3
}

usage() { sed -n '2,42p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; }

MODE=build
FORCE=0
SET=control-plane
while [[ $# -gt 0 ]]; do
  case "$1" in
    --print-dir) MODE=print-dir ;;
    --cached-only) MODE=cached-only ;;
    --force) FORCE=1 ;;
    --set) [[ $# -ge 2 ]] || { usage; die "--set needs a value: control-plane, pulumi, kind, haproxy, capi-images or worker"; }
           SET=$2; shift ;;
    --set=*) SET=${1#--set=} ;;
    -h|--help) usage; exit 0 ;;
    *) usage; die "unknown argument: $1" ;;
  esac
  shift
done
case "$SET" in
  control-plane|pulumi|kind|haproxy|capi-images|worker) ;;
  *) die "unknown set: $SET (control-plane, pulumi, kind, haproxy, capi-images or worker)" ;;
esac

command -v go >/dev/null 2>&1 || die "the go command is not on PATH"

GO_VERSION=$(go env GOVERSION)
GO_PLATFORM="$(go env GOOS)/$(go env GOARCH)"

if [[ $SET == pulumi ]]; then
  # shellcheck source=pulumi/build-set.sh
  source "$TOOLS_DIR/pulumi/build-set.sh"
  pulumi_set_main
  exit 0
fi
if [[ $SET == haproxy ]]; then
  # shellcheck source=kind/haproxy-set.sh
  source "$TOOLS_DIR/kind/haproxy-set.sh"
  haproxy_set_main
  exit 0
fi
if [[ $SET == capi-images ]]; then
  # shellcheck source=capi-images/build-set.sh
  source "$TOOLS_DIR/capi-images/build-set.sh"
  capi_images_set_main
  exit 0
fi
if [[ $SET == worker ]]; then
  # shellcheck source=worker/base-set.sh
  source "$TOOLS_DIR/worker/base-set.sh"
  worker_set_main
  exit 0
fi
if [[ $SET == kind ]]; then
  # shellcheck source=kind/build-set.sh
  source "$TOOLS_DIR/kind/build-set.sh"
  kind_set_main
  exit 0
fi

# Cache key: pins + build recipe + toolchain + every wrapper module file.
cache_key() {
  {
    printf 'kubernetes=%s\netcd=%s\nclusterAPI=%s\nrecipe=%s\ngo=%s\nplatform=%s\ncgo=%s\n' \
      "$KUBERNETES_VERSION" "$ETCD_VERSION" "$CLUSTER_API_VERSION" "$RECIPE_REVISION" \
      "$GO_VERSION" "$GO_PLATFORM" "$CGO_ENABLED"
    local m f
    for m in "${WRAPPER_MODULES[@]}"; do
      for f in go.mod go.sum tools.go; do
        printf '== %s/%s\n' "$m" "$f"
        cat "$TOOLS_DIR/$m/$f"
      done
    done
  } | sha256sum | cut -c1-16
}

KEY=$(cache_key)
BIN_DIR="$CACHE_ROOT/$KEY"

if [[ $MODE == print-dir ]]; then
  printf '%s\n' "$BIN_DIR"
  exit 0
fi

# go command run inside one wrapper module, at low priority.
gomod() {
  local mod=$1; shift
  (cd "$TOOLS_DIR/$mod" && nice -n "$NICE" go "$@")
}

complete_dir() {
  local d=$1 b
  [[ -f $d/manifest.json ]] || return 1
  for b in "${BINARIES[@]}"; do
    [[ -x $d/$b ]] || return 1
  done
}

json_str() {
  local s=$1
  s=${s//\\/\\\\}
  s=${s//\"/\\\"}
  printf '"%s"' "$s"
}

# Module directories (download them if the module cache lost them).
module_dir() {
  local mod=$1 path=$2 dir
  dir=$(cd "$TOOLS_DIR/$mod" && go list -m -f '{{.Dir}}' "$path")
  if [[ -z $dir || ! -d $dir ]]; then
    gomod "$mod" mod download "$path" >&2
    dir=$(cd "$TOOLS_DIR/$mod" && go list -m -f '{{.Dir}}' "$path")
  fi
  [[ -n $dir && -d $dir ]] || die "cannot locate module directory of $path (in tools/$mod)"
  printf '%s' "$dir"
}

# Writes manifest.json for bin dir $1 (final path $2) atomically.
write_manifest() {
  local dir=$1 final=$2
  local kdir edir cdir tdir
  kdir=$(module_dir kube k8s.io/kubernetes)
  edir=$(module_dir etcd go.etcd.io/etcd/server/v3)
  cdir=$(module_dir capi sigs.k8s.io/cluster-api)
  tdir=$(module_dir capi sigs.k8s.io/cluster-api/test)

  local -a comps=(core kubeadm-bootstrap kubeadm-control-plane capd)
  declare -A base=(
    [core]="$cdir"
    [kubeadm-bootstrap]="$cdir/bootstrap/kubeadm"
    [kubeadm-control-plane]="$cdir/controlplane/kubeadm"
    [capd]="$tdir/infrastructure/docker"
  )
  local c
  for c in "${comps[@]}"; do
    ls "${base[$c]}"/config/crd/bases/*.yaml >/dev/null 2>&1 \
      || die "no CRD YAML files in ${base[$c]}/config/crd/bases"
    [[ -f ${base[$c]}/config/webhook/manifests.yaml ]] \
      || die "missing ${base[$c]}/config/webhook/manifests.yaml"
  done

  local sep b
  {
    printf '{\n'
    printf '  "schema": 1,\n'
    printf '  "cacheKey": %s,\n' "$(json_str "$KEY")"
    printf '  "binDir": %s,\n' "$(json_str "$final")"
    printf '  "kubernetes": %s,\n' "$(json_str "$KUBERNETES_VERSION")"
    printf '  "etcd": %s,\n' "$(json_str "$ETCD_VERSION")"
    printf '  "clusterAPI": %s,\n' "$(json_str "$CLUSTER_API_VERSION")"
    printf '  "go": %s,\n' "$(json_str "$GO_VERSION")"
    printf '  "platform": %s,\n' "$(json_str "$GO_PLATFORM")"
    printf '  "binaries": {\n'
    sep=
    for b in "${BINARIES[@]}"; do
      printf '%s    %s: %s' "$sep" "$(json_str "$b")" "$(json_str "$final/$b")"
      sep=$',\n'
    done
    printf '\n  },\n'
    printf '  "moduleDirs": {\n'
    printf '    "k8s.io/kubernetes": %s,\n' "$(json_str "$kdir")"
    printf '    "go.etcd.io/etcd/server/v3": %s,\n' "$(json_str "$edir")"
    printf '    "sigs.k8s.io/cluster-api": %s,\n' "$(json_str "$cdir")"
    printf '    "sigs.k8s.io/cluster-api/test": %s\n' "$(json_str "$tdir")"
    printf '  },\n'
    printf '  "crdDirs": [\n'
    sep=
    for c in "${comps[@]}"; do
      printf '%s    %s' "$sep" "$(json_str "${base[$c]}/config/crd/bases")"
      sep=$',\n'
    done
    printf '\n  ],\n'
    printf '  "crdDirsByComponent": {\n'
    sep=
    for c in "${comps[@]}"; do
      printf '%s    %s: %s' "$sep" "$(json_str "$c")" "$(json_str "${base[$c]}/config/crd/bases")"
      sep=$',\n'
    done
    printf '\n  },\n'
    printf '  "webhookManifests": {\n'
    sep=
    for c in "${comps[@]}"; do
      printf '%s    %s: %s' "$sep" "$(json_str "$c")" "$(json_str "${base[$c]}/config/webhook/manifests.yaml")"
      sep=$',\n'
    done
    printf '\n  }\n'
    printf '}\n'
  } >"$dir/manifest.json.tmp"
  mv -f "$dir/manifest.json.tmp" "$dir/manifest.json"
}

# The cached path: every binary present -> refresh module dirs if needed, done.
cached_exit() {
  local cdir tdir
  cdir=$(module_dir capi sigs.k8s.io/cluster-api)
  tdir=$(module_dir capi sigs.k8s.io/cluster-api/test)
  if ! grep -qF "\"$cdir\"" "$BIN_DIR/manifest.json" || ! grep -qF "\"$tdir\"" "$BIN_DIR/manifest.json"; then
    log "module cache moved; rewriting manifest.json"
    write_manifest "$BIN_DIR" "$BIN_DIR"
  fi
  log "cached: $BIN_DIR"
  printf '%s\n' "$BIN_DIR"
  exit 0
}

if [[ $FORCE == 0 ]] && complete_dir "$BIN_DIR"; then
  cached_exit
fi
cached_only_exit "$BIN_DIR"

mkdir -p "$CACHE_ROOT"
# Serialise builds of the same key (a second caller waits, then finds the cache).
exec 9>"$CACHE_ROOT/.lock-$KEY"
if ! flock -n 9; then
  log "another build of $KEY is running; waiting for it"
  flock 9
fi
if [[ $FORCE == 0 ]] && complete_dir "$BIN_DIR"; then
  cached_exit
fi

# Leftovers of killed builds of this key (we hold its lock, so they are dead).
rm -rf "$CACHE_ROOT/.tmp-$KEY".* "$CACHE_ROOT/.old-$KEY".*
TMP_DIR=$(mktemp -d "$CACHE_ROOT/.tmp-$KEY.XXXXXX")
trap 'rm -rf "$TMP_DIR"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

log "building into $BIN_DIR (go $GO_VERSION, $GO_PLATFORM)"
log "pins: kubernetes $KUBERNETES_VERSION, etcd $ETCD_VERSION, cluster-api $CLUSTER_API_VERSION"

# Check that the pins above match what the wrapper modules actually select.
check_pin() {
  local mod=$1 path=$2 want=$3 got
  got=$(cd "$TOOLS_DIR/$mod" && go list -m -f '{{.Version}}' "$path")
  [[ $got == "$want" ]] || die "tools/$mod selects $path $got but build.sh pins $want: update tools/$mod/go.mod (see tools/README.md)"
}
check_pin kube k8s.io/kubernetes "$KUBERNETES_VERSION"
check_pin kube k8s.io/component-base "v0.${KUBERNETES_VERSION#v1.}"
check_pin etcd go.etcd.io/etcd/server/v3 "$ETCD_VERSION"
check_pin etcd go.etcd.io/etcd/api/v3 "$ETCD_VERSION"
check_pin capi sigs.k8s.io/cluster-api "$CLUSTER_API_VERSION"
check_pin capi sigs.k8s.io/cluster-api/test "$CLUSTER_API_VERSION"

# Release time of a module version (from the proxy's .info): used as buildDate
# so that rebuilding the same pins gives the same bytes.
release_date() {
  (cd "$TOOLS_DIR/$1" && go list -m -f '{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}' "$2")
}

T_ALL=$SECONDS
T0=$SECONDS
for m in "${WRAPPER_MODULES[@]}"; do
  log "downloading modules of tools/$m"
  gomod "$m" mod download >&2
done
log "modules downloaded in $((SECONDS - T0))s"
TIMINGS="download $((SECONDS - T0))"

kube_date=$(release_date kube k8s.io/kubernetes)
capi_date=$(release_date capi sigs.k8s.io/cluster-api)
kube_minor=${KUBERNETES_VERSION#v1.}; kube_minor=${kube_minor%%.*}
capi_major=${CLUSTER_API_VERSION#v}; capi_major=${capi_major%%.*}
capi_minor=${CLUSTER_API_VERSION#v*.}; capi_minor=${capi_minor%%.*}

ldflags_for() {
  local flags="-s -w" k pkg
  case $1 in
    kube-apiserver)
      # Same variables as kubernetes' hack/lib/version.sh; there is no git
      # commit in a module zip, so gitCommit keeps its default.
      for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
        flags+=" -X $pkg.gitVersion=$KUBERNETES_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$kube_minor"
        flags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$kube_date"
      done
      ;;
    etcd)
      # etcd's version is a constant; only GitSHA is stamped by its build script.
      flags+=" -X go.etcd.io/etcd/api/v3/version.GitSHA=module-$ETCD_VERSION"
      ;;
    *)
      k=sigs.k8s.io/cluster-api/version
      flags+=" -X $k.gitVersion=$CLUSTER_API_VERSION -X $k.gitMajor=$capi_major -X $k.gitMinor=$capi_minor"
      flags+=" -X $k.gitTreeState=clean -X $k.buildDate=$capi_date"
      ;;
  esac
  printf '%s' "$flags"
}

for b in "${BINARIES[@]}"; do
  read -r mod pkg <<<"${BUILD_SPEC[$b]}"
  log "[$b] go build $pkg (tools/$mod) ..."
  T0=$SECONDS
  gomod "$mod" build -mod=readonly -trimpath -ldflags "$(ldflags_for "$b")" -o "$TMP_DIR/$b" "$pkg" \
    || die "[$b] go build $pkg failed after $((SECONDS - T0))s"
  log "[$b] built in $((SECONDS - T0))s ($(du -h "$TMP_DIR/$b" | cut -f1))"
  TIMINGS+=$'\n'"$b $((SECONDS - T0))"
done
TIMINGS+=$'\n'"total $((SECONDS - T_ALL))"

printf '%s\n' "$TIMINGS" >"$TMP_DIR/build-seconds.txt"
write_manifest "$TMP_DIR" "$BIN_DIR"

# Publish atomically: the key dir appears complete or not at all.
if [[ -e $BIN_DIR ]]; then
  OLD=$(mktemp -d "$CACHE_ROOT/.old-$KEY.XXXXXX")
  mv "$BIN_DIR" "$OLD/"
  rm -rf "$OLD"
fi
chmod 755 "$TMP_DIR"
mv -T "$TMP_DIR" "$BIN_DIR"
trap - EXIT
log "done in $((SECONDS - T_ALL))s: $BIN_DIR"
printf '%s\n' "$BIN_DIR"
