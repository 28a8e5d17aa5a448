#!/usr/bin/env bash
# Builds the worker image (deploy/Dockerfile) on the engine DOCKER_HOST names and saves it as a
# `docker save` archive, for `kind load image-archive` or `docker load`.
#
# Usage: tools/worker/build-image.sh [--tag TAG] [--out FILE] [--no-cache]
#   TAG   default fleet-calibrator:dev (deploy/worker/deployment.yaml's image)
#   FILE  default ${CALIBRATOR_BIN_CACHE:-~/.cache/fleet-calibrator/bin}/worker-image/<tag>.tar
#   --no-cache  build every layer again (the engine's layer cache unused)
#
# Steps, each timed on stderr; stdout is one line, the archive's path:
#   1. the base image: `tools/build.sh --set worker` (cached), loaded unless the engine has it;
#   2. the wheelhouse: every wheel of deploy/requirements.lock and deploy/build-requirements.lock,
#      `pip download --require-hashes --only-binary=:all:` from the ordinary index (the only step
#      that needs the network), cached per lock contents;
#   3. `docker build` on a context of the package sources, the locks and the wheelhouse: offline;
#   4. `docker save`.
# The engine's socket is a file, so the engine may run in a network namespace of its own
# (docs/deploy.md) while this script downloads the wheels from the host's.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
CACHE_ROOT=${CALIBRATOR_BIN_CACHE:-${HOME}/.cache/fleet-calibrator/bin}
TAG=fleet-calibrator:dev
OUT=
NO_CACHE=()

log() { printf '[tools/worker/build-image.sh] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

while [[ $# -gt 0 ]]; do
  case "$1" in
    --tag) [[ $# -ge 2 && -n $2 ]] || die "--tag needs a value"; TAG=$2; shift ;;
    --out) [[ $# -ge 2 && -n $2 ]] || die "--out needs a value"; OUT=$2; shift ;;
    --no-cache) NO_CACHE=(--no-cache) ;;
    -h|--help) sed -n '2,18p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 0 ;;
    *) die "unknown argument: $1 (see --help)" ;;
  esac
  shift
done
[[ $TAG == *:* && $TAG != *' '* ]] || die "--tag must be NAME:TAG, got: $TAG"
[[ -n ${DOCKER_HOST:-} ]] || die "DOCKER_HOST is not set: start our engine first (docs/deploy.md)"
command -v docker >/dev/null || die "the docker CLI is not on PATH"
OUT=${OUT:-$CACHE_ROOT/worker-image/${TAG//[\/:]/_}.tar}

t_all=$SECONDS
t0=$SECONDS
base_dir=$("$REPO/tools/build.sh" --set worker | tail -1)
base=$(sed -n 's/^  "image": "\(.*\)",$/\1/p' "$base_dir/manifest.json")
[[ -n $base ]] || die "no image name in $base_dir/manifest.json"
if ! docker image inspect "$base" >/dev/null 2>&1; then
  docker load -q -i "$base_dir/images/worker-base.tar" >&2 || die "loading $base failed"
fi
log "base $base: $((SECONDS - t0)) s"

t0=$SECONDS
locks=("$REPO/deploy/requirements.lock" "$REPO/deploy/build-requirements.lock")
wkey=$(cat "${locks[@]}" | sha256sum | cut -c1-16)
wheelhouse=$CACHE_ROOT/worker-wheelhouse-$wkey
if [[ ! -f $wheelhouse/.complete ]]; then
  mkdir -p "$CACHE_ROOT"
  tmp=$(mktemp -d "$CACHE_ROOT/.tmp-worker-wheelhouse.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  for lock in "${locks[@]}"; do
    # --no-deps: the lock is complete; --only-binary: nothing is built on this host or in the
    # image; wherever a wheel comes from (index or a configured find-links), its hash is checked.
    python3 -m pip download --quiet --require-hashes --no-deps --only-binary=:all: \
      --dest "$tmp" -r "$lock" >&2 || die "pip download of $lock failed"
  done
  touch "$tmp/.complete"
  rm -rf "$wheelhouse"
  mv -T "$tmp" "$wheelhouse"
  trap - EXIT
fi
log "wheelhouse $wheelhouse ($(find "$wheelhouse" -name '*.whl' | wc -l) wheels): $((SECONDS - t0)) s"

t0=$SECONDS
ctx=$(mktemp -d "${TMPDIR:-/tmp}/fc-worker-context.XXXXXX")
trap 'rm -rf "$ctx"' EXIT
# Tracked files only: no __pycache__, .git or build output enters the image.
(cd "$REPO" && git ls-files -z -- pyproject.toml README.md orchestrator workflows infra \
  deploy/Dockerfile deploy/requirements.lock deploy/build-requirements.lock \
  | xargs -0 cp --parents -t "$ctx") || die "assembling the build context failed"
cp -al "$wheelhouse" "$ctx/wheelhouse" 2>/dev/null || cp -a "$wheelhouse" "$ctx/wheelhouse"
docker build -q "${NO_CACHE[@]}" -f "$ctx/deploy/Dockerfile" --build-arg "BASE=$base" -t "$TAG" "$ctx" >&2 \
  || die "docker build failed"
log "docker build $TAG: $((SECONDS - t0)) s"

t0=$SECONDS
mkdir -p "$(dirname "$OUT")"
docker save -o "$OUT.tmp" "$TAG" || die "docker save failed"
mv -f "$OUT.tmp" "$OUT"
size=$(docker image inspect -f '{{.Size}}' "$TAG")
log "docker save: $((SECONDS - t0)) s; image $((size / 1000000)) MB, archive $(($(stat -c %s "$OUT") / 1000000)) MB; total $((SECONDS - t_all)) s"
printf '%s\n' "$OUT"
