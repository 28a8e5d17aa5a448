#!/usr/bin/env bash
# Sourced by ../build.sh for --set haproxy: the load-balancer image of CAPD's docker backend,
# built from Debian's haproxy package on a debootstrap root, written as a `docker save` archive
# without a Docker engine (one layer, config and manifest assembled here), so the build needs the
# Debian mirror but no engine, and the engine that loads it needs no network.
# Uses build.sh's pins (HAPROXY_*, KIND_DEBIAN_*), helpers (log, die) and MODE/FORCE/CACHE_ROOT.

HAPROXY_PACKAGES=haproxy,ca-certificates

haproxy_cache_key() {
  printf 'suite=%s\npackages=%s\nimage=%s\nrecipe=%s\nconfig=%s\n' \
    "$KIND_DEBIAN_SUITE" "$HAPROXY_PACKAGES" "$HAPROXY_IMAGE" "$HAPROXY_RECIPE_REVISION" \
    "$(haproxy_default_config | sha256sum | cut -c1-16)" | sha256sum | cut -c1-16
}

# The configuration the container starts with, before CAPD writes its own and sends SIGHUP
# (haproxy -W: the master reloads on SIGHUP). It must parse and listen; no backends yet.
# maxconn: haproxy raises its open-file limit to about 2 x maxconn and exits when it cannot;
# this VM's hard limit is 20000 and nothing here may raise it (no CAP_SYS_RESOURCE).
haproxy_default_config() {
  cat <<'CFG'
# Fleet Calibrator's CAPD load balancer: replaced by CAPD on the first reconcile.
global
  maxconn 4000

defaults
  mode tcp
  timeout connect 5000
  timeout client 50000
  timeout server 50000

frontend control-plane
  bind *:6443
  default_backend kube-apiservers

backend kube-apiservers
CFG
}

haproxy_complete_dir() {
  [[ -f $1/images/haproxy.tar && -f $1/manifest.json ]]
}

haproxy_set_main() {
  local key dir
  key=$(haproxy_cache_key)
  dir=$CACHE_ROOT/haproxy-$key
  if [[ $MODE == print-dir ]]; then printf '%s\n' "$dir"; exit 0; fi
  if [[ $FORCE == 0 ]] && haproxy_complete_dir "$dir"; then
    log "cached: $dir"; printf '%s\n' "$dir"; exit 0
  fi
  cached_only_exit "$dir"
  [[ $(id -u) == 0 ]] || die "[haproxy] needs root (debootstrap)"
  command -v debootstrap >/dev/null || die "[haproxy] debootstrap not found (apt-get install debootstrap)"
  mkdir -p "$CACHE_ROOT"
  exec 9>"$CACHE_ROOT/.lock-haproxy-$key"
  if ! flock -n 9; then log "another build of haproxy-$key is running; waiting for it"; flock 9; fi
  if [[ $FORCE == 0 ]] && haproxy_complete_dir "$dir"; then
    log "cached: $dir"; printf '%s\n' "$dir"; exit 0
  fi
  HAPROXY_OUT=$(mktemp -d "$CACHE_ROOT/.tmp-haproxy-$key.XXXXXX")
  trap 'rm -rf "$HAPROXY_OUT"' EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  local t_all=$SECONDS t0=$SECONDS root=$HAPROXY_OUT/rootfs version timings
  log "[haproxy] debootstrap --variant=minbase --include=$HAPROXY_PACKAGES $KIND_DEBIAN_SUITE ..."
  nice -n "$NICE" debootstrap --variant=minbase --include="$HAPROXY_PACKAGES" \
    "$KIND_DEBIAN_SUITE" "$root" "$KIND_DEBIAN_MIRROR" >"$HAPROXY_OUT/debootstrap.log" 2>&1 \
    || { cp "$HAPROXY_OUT/debootstrap.log" "$CACHE_ROOT/haproxy-debootstrap.log"; \
         die "[haproxy] debootstrap failed: see $CACHE_ROOT/haproxy-debootstrap.log"; }
  timings="debootstrap $((SECONDS - t0))"
  t0=$SECONDS
  version=$(chroot "$root" dpkg-query -W -f '${Version}' haproxy) || die "[haproxy] no haproxy in the root"
  mkdir -p "$root/usr/local/etc/haproxy" "$root/run/haproxy"
  haproxy_default_config >"$root/usr/local/etc/haproxy/haproxy.cfg"
  chroot "$root" haproxy -c -f /usr/local/etc/haproxy/haproxy.cfg >/dev/null \
    || die "[haproxy] the default configuration does not parse"
  # A load balancer container needs no package manager state, docs or init scripts.
  rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/* "$root"/var/log/* \
    "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/locale/*
  mkdir -p "$HAPROXY_OUT/images"
  one_layer_image "$root" "$HAPROXY_IMAGE" "$HAPROXY_OUT/images/haproxy.tar" haproxy \
    '{"Env":["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],"Entrypoint":["haproxy","-W","-db","-f","/usr/local/etc/haproxy/haproxy.cfg"],"StopSignal":"SIGUSR1"}'
  rm -rf "$root"
  timings+=$'\n'"image $((SECONDS - t0))"$'\n'"total $((SECONDS - t_all))"
  printf '%s\n' "$timings" >"$HAPROXY_OUT/build-seconds.txt"
  printf '{\n  "key": "%s",\n  "image": "%s",\n  "haproxy": "%s",\n  "debian": "%s"\n}\n' \
    "$key" "$HAPROXY_IMAGE" "$version" "$KIND_DEBIAN_SUITE" >"$HAPROXY_OUT/manifest.json"
  rm -f "$HAPROXY_OUT/debootstrap.log"
  if [[ -e $dir ]]; then rm -rf "$dir"; fi
  chmod 755 "$HAPROXY_OUT"
  mv -T "$HAPROXY_OUT" "$dir"
  HAPROXY_OUT=
  log "[haproxy] done in $((SECONDS - t_all))s: $dir (haproxy $version)"
  printf '%s\n' "$dir"
}
