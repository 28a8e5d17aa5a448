#!/usr/bin/env bash
# Sourced by ../build.sh for --set worker: the base image of the worker image (deploy/Dockerfile),
# Debian bookworm with Debian's python3 (3.11) and CA certificates on a debootstrap minbase root,
# written as a `docker save` archive without a Docker engine (one layer, config and manifest
# assembled here, as the haproxy set does), so no registry's python image is needed and the
# engine that loads it needs no network. No pip, no compiler: deploy/Dockerfile runs pip from
# the pinned pip wheel of its wheelhouse (tools/worker/build-image.sh).
# Uses build.sh's pins (WORKER_*, KIND_DEBIAN_*), helpers (log, die) and MODE/FORCE/CACHE_ROOT.

# python3: Debian's CPython 3.11 with its standard library (venv included; ensurepip is not,
# and is not needed). passwd: useradd for the runtime stage's user 10001 (minbase has it, named
# here so a change of Debian's priorities cannot drop it silently).
WORKER_PACKAGES=python3,ca-certificates,passwd

worker_cache_key() {
  printf 'suite=%s\npackages=%s\nimage=%s\nrecipe=%s\narch=%s\n' \
    "$KIND_DEBIAN_SUITE" "$WORKER_PACKAGES" "$WORKER_BASE_IMAGE" "$WORKER_RECIPE_REVISION" \
    "$(go env GOARCH)" | sha256sum | cut -c1-16
}

worker_complete_dir() {
  [[ -f $1/images/worker-base.tar && -f $1/manifest.json ]]
}

worker_set_main() {
  local key dir
  key=$(worker_cache_key)
  dir=$CACHE_ROOT/worker-$key
  if [[ $MODE == print-dir ]]; then printf '%s\n' "$dir"; exit 0; fi
  if [[ $FORCE == 0 ]] && worker_complete_dir "$dir"; then
    log "cached: $dir"; printf '%s\n' "$dir"; exit 0
  fi
  cached_only_exit "$dir"
  [[ $(id -u) == 0 ]] || die "[worker] needs root (debootstrap)"
  command -v debootstrap >/dev/null || die "[worker] debootstrap not found (apt-get install debootstrap)"
  mkdir -p "$CACHE_ROOT"
  exec 9>"$CACHE_ROOT/.lock-worker-$key"
  if ! flock -n 9; then log "another build of worker-$key is running; waiting for it"; flock 9; fi
  if [[ $FORCE == 0 ]] && worker_complete_dir "$dir"; then
    log "cached: $dir"; printf '%s\n' "$dir"; exit 0
  fi
  WORKER_OUT=$(mktemp -d "$CACHE_ROOT/.tmp-worker-$key.XXXXXX")
  trap 'rm -rf "$WORKER_OUT"' EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  local t_all=$SECONDS t0=$SECONDS root=$WORKER_OUT/rootfs python compilers timings
  log "[worker] debootstrap --variant=minbase --include=$WORKER_PACKAGES $KIND_DEBIAN_SUITE ..."
  nice -n "$NICE" debootstrap --variant=minbase --include="$WORKER_PACKAGES" \
    "$KIND_DEBIAN_SUITE" "$root" "$KIND_DEBIAN_MIRROR" >"$WORKER_OUT/debootstrap.log" 2>&1 \
    || { cp "$WORKER_OUT/debootstrap.log" "$CACHE_ROOT/worker-debootstrap.log"; \
         die "[worker] debootstrap failed: see $CACHE_ROOT/worker-debootstrap.log"; }
  timings="debootstrap $((SECONDS - t0))"
  t0=$SECONDS
  python=$(chroot "$root" dpkg-query -W -f '${Version}' python3) || die "[worker] no python3 in the root"
  chroot "$root" python3 -c 'import sys, ssl, venv; assert sys.version_info[:2] == (3, 11), sys.version' \
    || die "[worker] the root's python3 is not a working CPython 3.11 with ssl and venv"
  # The runtime image must hold no compiler; minbase and python3 bring none (checked, not assumed).
  # (gcc-12-base, which libgcc needs, is a directory of docs, not a compiler.)
  compilers=$(cd "$root/usr/bin" && ls -d cc c++ gcc g++ cpp clang ld as x86_64-linux-gnu-gcc* 2>/dev/null || true)
  [[ -z $compilers ]] || die "[worker] a compiler came into the root: $compilers"
  # Debian compiled the standard library with source timestamps, which the layer's fixed mtimes
  # (tar --mtime=@0) would make stale: every start of a read-only container would compile it
  # again in memory. Unchecked hash-based bytecode holds no mtime and is never rechecked (the
  # image is immutable); a fixed hash seed keeps it byte-identical from build to build.
  chroot "$root" env PYTHONHASHSEED=0 python3 -m compileall -q -f \
    --invalidation-mode unchecked-hash /usr/lib/python3.11 /usr/lib/python3/dist-packages >/dev/null \
    || die "[worker] compiling the standard library failed"
  [[ $(od -A n -t x1 -j 4 -N 1 "$root/usr/lib/python3.11/encodings/__pycache__/__init__.cpython-311.pyc") == " 01" ]] \
    || die "[worker] the standard library's bytecode is not unchecked-hash"
  # A container needs no package lists, docs, man pages, locales or the build host's names.
  rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/* "$root"/var/log/* \
    "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/locale/* \
    "$root"/usr/share/info/*
  : >"$root/etc/resolv.conf"
  printf 'localhost\n' >"$root/etc/hostname"
  mkdir -p "$WORKER_OUT/images"
  one_layer_image "$root" "$WORKER_BASE_IMAGE" "$WORKER_OUT/images/worker-base.tar" worker \
    '{"Env":["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin","LANG=C.UTF-8"],"Cmd":["python3"]}'
  rm -rf "$root"
  timings+=$'\n'"image $((SECONDS - t0))"$'\n'"total $((SECONDS - t_all))"
  printf '%s\n' "$timings" >"$WORKER_OUT/build-seconds.txt"
  printf '{\n  "key": "%s",\n  "image": "%s",\n  "python3": "%s",\n  "debian": "%s"\n}\n' \
    "$key" "$WORKER_BASE_IMAGE" "$python" "$KIND_DEBIAN_SUITE" >"$WORKER_OUT/manifest.json"
  rm -f "$WORKER_OUT/debootstrap.log"
  if [[ -e $dir ]]; then rm -rf "$dir"; fi
  chmod 755 "$WORKER_OUT"
  mv -T "$WORKER_OUT" "$dir"
  WORKER_OUT=
  log "[worker] done in $((SECONDS - t_all))s: $dir (python3 $python)"
  printf '%s\n' "$dir"
}
