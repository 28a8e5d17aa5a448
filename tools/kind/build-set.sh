# The "kind" set of ../build.sh (tools/build.sh --set kind): the kind CLI and the images kind and
# CAPD's docker backend run (a kind base image and one node image per Kubernetes minor), built on
# this machine from Debian packages and pinned Go modules, with nothing pulled from any registry.
# Sourced by ../build.sh after its argument parsing; uses its pins (KIND_*), helpers (log, die)
# and variables (TOOLS_DIR, CACHE_ROOT, NICE, MODE, FORCE, GO_VERSION, GO_PLATFORM).
# See ../README.md, "The kind set".
#
# Needs: root (debootstrap, chroot), gcc with a static libc (pause), and a Docker engine through
# DOCKER_HOST or the default socket (image assembly: docker import/create/commit/save); start ours
# with `eval "$(python3 -m orchestrator.localplane.dockerd up)"`.
#
# Cache dir: $CACHE_ROOT/kind-<key>/ with
#   bin/kind, bin/kubectl                  for the host
#   images/kind-base.tar                   fleet-calibrator/kind-base:<key>
#   images/node-<version>.tar              kindest/node:<version> (each preloads its component images)
#   manifest.json, build-seconds.txt
# `docker load -i` puts an image into an engine; tools/kind/load-images.sh does it for all.

# Distinct etcd and CoreDNS versions over all node versions (kubeadm's choice per minor).
KIND_ETCD_VERSIONS=()
KIND_COREDNS_VERSIONS=()
KIND_MODULES=(kind/kind kind/nodetools kind/kube-router)
for _v in "${KIND_NODE_VERSIONS[@]}"; do
  KIND_MODULES+=("kind/k8s-${_v%.*}")
  _e=${KIND_ETCD_FOR[${_v%.*}]:?no etcd version for ${_v%.*} in KIND_ETCD_FOR}
  _c=${KIND_COREDNS_FOR[${_v%.*}]:?no CoreDNS version for ${_v%.*} in KIND_COREDNS_FOR}
  [[ " ${KIND_ETCD_VERSIONS[*]} " == *" $_e "* ]] || { KIND_ETCD_VERSIONS+=("$_e"); KIND_MODULES+=("kind/etcd-v$_e"); }
  [[ " ${KIND_COREDNS_VERSIONS[*]} " == *" $_c "* ]] || { KIND_COREDNS_VERSIONS+=("$_c"); KIND_MODULES+=("kind/coredns-$_c"); }
done
unset _v _e _c
KIND_ROOTFS="$TOOLS_DIR/kind/rootfs"
# Debian packages of the base image (systemd as PID 1, containerd + runc, what kubelet,
# kube-proxy and kube-router call on a node, and what kind runs through `docker exec`).
KIND_PACKAGES=systemd,systemd-sysv,dbus,containerd,runc,iptables,nftables,ipset,iproute2,conntrack,ethtool,socat,util-linux,mount,kmod,procps,ca-certificates,libseccomp2,bash,tar
KIND_CNI_PLUGINS=(bridge loopback ptp host-local portmap)

kind_go() { local mod=$1; shift; (cd "$TOOLS_DIR/$mod" && nice -n "$NICE" go "$@"); }
kind_json() { local s=$1; s=${s//\\/\\\\}; s=${s//\"/\\\"}; printf '"%s"' "$s"; }

kind_cache_key() {
  {
    printf 'set=kind\nkind=%s\nnodes=%s\npause=%s\ncni=%s\ncrictl=%s\n' \
      "$KIND_VERSION" "${KIND_NODE_VERSIONS[*]}" \
      "$KIND_PAUSE_VERSION" "$KIND_CNI_PLUGINS_VERSION" "$KIND_CRICTL_VERSION"
    local v
    for v in "${KIND_NODE_VERSIONS[@]}"; do
      printf '%s: etcd=%s coredns=%s\n' "$v" "${KIND_ETCD_FOR[${v%.*}]}" "${KIND_COREDNS_FOR[${v%.*}]}"
    done
    printf 'kubeRouter=%s\ndebian=%s\npackages=%s\nrecipe=%s\ngo=%s\nplatform=%s\ncgo=%s\n' \
      "$KIND_KUBE_ROUTER_VERSION" "$KIND_DEBIAN_SUITE" "$KIND_PACKAGES" "$KIND_RECIPE_REVISION" \
      "$GO_VERSION" "$GO_PLATFORM" "$CGO_ENABLED"
    # Each wrapper module's go.mod, go.sum and Go files (tools.go, or the CoreDNS modules' main.go).
    local m f
    for m in "${KIND_MODULES[@]}"; do
      while IFS= read -r -d '' f; do
        printf '== %s/%s\n' "$m" "${f#./}"
        cat "$TOOLS_DIR/$m/$f"
      done < <(cd "$TOOLS_DIR/$m" && find . -type f \( -name go.mod -o -name go.sum -o -name '*.go' \) -print0 | LC_ALL=C sort -z)
    done
    # The files copied into the base image define it as much as the pins do.
    (cd "$KIND_ROOTFS" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum)
  } | sha256sum | cut -c1-16
}

kind_complete_dir() {
  local d=$1 v
  [[ -f $d/manifest.json && -x $d/bin/kind && -x $d/bin/kubectl && -f $d/images/kind-base.tar ]] || return 1
  for v in "${KIND_NODE_VERSIONS[@]}"; do
    [[ -f $d/images/node-$v.tar ]] || return 1
  done
}

kind_check_pin() {
  local mod=$1 path=$2 want=$3 got
  got=$(cd "$TOOLS_DIR/$mod" && go list -m -f '{{.Version}}' "$path")
  [[ $got == "$want" ]] || die "tools/$mod selects $path $got but build.sh pins $want"
}

kind_release_date() {
  (cd "$TOOLS_DIR/$1" && go list -m -f '{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}' "$2")
}

# kind_build NAME MODULE PACKAGE LDFLAGS: one static binary into $KIND_WORK/bin, timed.
kind_build() {
  local name=$1 mod=$2 pkg=$3 flags=$4 t0=$SECONDS
  log "[kind] go build $pkg -> $name (tools/$mod) ..."
  kind_go "$mod" build -mod=readonly -trimpath -ldflags "-s -w $flags" -o "$KIND_WORK/bin/$name" "$pkg" \
    || die "[kind] go build $pkg failed after $((SECONDS - t0))s"
  log "[kind] $name built in $((SECONDS - t0))s"
  KIND_TIMINGS+=$'\n'"$name $((SECONDS - t0))"
}

kind_build_binaries() {
  local v minor mod date flags p b
  kind_build kind kind/kind sigs.k8s.io/kind ""
  for v in "${KIND_NODE_VERSIONS[@]}"; do
    minor=${v#v1.}; minor=${minor%%.*}; mod=kind/k8s-${v%.*}
    date=$(kind_release_date "$mod" k8s.io/kubernetes)
    flags=
    for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
      flags+=" -X $p.gitVersion=$v -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean -X $p.buildDate=$date"
    done
    mkdir -p "$KIND_WORK/bin/$v"
    for b in kubeadm kubelet kubectl kube-apiserver kube-controller-manager kube-scheduler kube-proxy; do
      kind_build "$v/$b" "$mod" "k8s.io/kubernetes/cmd/$b" "$flags"
    done
  done
  for v in "${KIND_ETCD_VERSIONS[@]}"; do
    kind_build "etcd-$v" "kind/etcd-v$v" go.etcd.io/etcd/server/v3 \
      "-X go.etcd.io/etcd/api/v3/version.GitSHA=module-v$v"
  done
  # CoreDNS: the wrapper module's own main package, upstream's start-up with a subset of the
  # plugins (see tools/kind/coredns-<VERSION>/main.go); GitCommit is what upstream's Makefile stamps.
  for v in "${KIND_COREDNS_VERSIONS[@]}"; do
    kind_build "coredns-$v" "kind/coredns-$v" "fleet-calibrator/tools/kind/coredns-$v" \
      "-X github.com/coredns/coredns/coremain.GitCommit=module-$v"
  done
  kind_build crictl kind/nodetools sigs.k8s.io/cri-tools/cmd/crictl \
    "-X sigs.k8s.io/cri-tools/pkg/version.Version=$KIND_CRICTL_VERSION"
  mkdir -p "$KIND_WORK/bin/cni"
  for p in "${KIND_CNI_PLUGINS[@]}"; do
    case $p in
      host-local) b=ipam/host-local ;;
      portmap) b=meta/portmap ;;
      *) b=main/$p ;;
    esac
    kind_build "cni/$p" kind/nodetools "github.com/containernetworking/plugins/plugins/$b" \
      "-X github.com/containernetworking/plugins/pkg/utils/buildversion.BuildVersion=$KIND_CNI_PLUGINS_VERSION"
  done
  kind_build kube-router kind/kube-router github.com/cloudnativelabs/kube-router/v2/cmd/kube-router \
    "-X github.com/cloudnativelabs/kube-router/v2/pkg/version.Version=$KIND_KUBE_ROUTER_VERSION"
  # pause: upstream's C source, shipped inside the k8s.io/kubernetes module, compiled static.
  local kdir t0=$SECONDS
  kdir=$(cd "$TOOLS_DIR/kind/k8s-${KIND_NODE_VERSIONS[0]%.*}" && go list -m -f '{{.Dir}}' k8s.io/kubernetes)
  nice -n "$NICE" gcc -Os -Wall -Werror -static -DVERSION="v$KIND_PAUSE_VERSION-module" \
    -o "$KIND_WORK/bin/pause" "$kdir/build/pause/linux/pause.c" || die "[kind] gcc pause.c failed"
  KIND_TIMINGS+=$'\n'"pause $((SECONDS - t0))"
}

# The Debian root of the base image. debootstrap runs once per suite + package list (its own
# cache entry, $CACHE_ROOT/kind-debian-<key>.tar, so that changing our files or a Go pin does not
# repeat it); each build unpacks a fresh copy into the work dir.
kind_debian_key() {
  printf 'suite=%s\npackages=%s\nrecipe=1\n' "$KIND_DEBIAN_SUITE" "$KIND_PACKAGES" | sha256sum | cut -c1-16
}

kind_rootfs() {
  local root=$KIND_WORK/rootfs t0=$SECONDS tarball
  tarball=$CACHE_ROOT/kind-debian-$(kind_debian_key).tar
  if [[ ! -f $tarball ]]; then
    local tmp=$KIND_WORK/debootstrap
    rm -rf "$tmp"
    log "[kind] debootstrap --variant=minbase $KIND_DEBIAN_SUITE ($KIND_DEBIAN_MIRROR) ..."
    nice -n "$NICE" debootstrap --variant=minbase --include="$KIND_PACKAGES" \
      "$KIND_DEBIAN_SUITE" "$tmp" "$KIND_DEBIAN_MIRROR" >"$KIND_WORK/debootstrap.log" 2>&1 \
      || die "[kind] debootstrap failed: see $KIND_WORK/debootstrap.log"
    tar -C "$tmp" --numeric-owner -cf "$tarball.tmp" . && mv -f "$tarball.tmp" "$tarball"
    rm -rf "$tmp"
    KIND_TIMINGS+=$'\n'"debootstrap $((SECONDS - t0))"
  fi
  t0=$SECONDS
  rm -rf "$root"
  mkdir -p "$root"
  tar -C "$root" --numeric-owner -xf "$tarball" || die "[kind] unpacking $tarball failed"
  # Our files, then the Go-built node tools, then the unit state.
  cp -a "$KIND_ROOTFS"/. "$root"/
  install -m 0755 "$KIND_WORK/bin/crictl" "$root/usr/local/bin/crictl"
  mkdir -p "$root/opt/cni/bin" "$root/etc/cni/net.d" "$root/etc/kubernetes/manifests"
  local p
  for p in "${KIND_CNI_PLUGINS[@]}"; do
    install -m 0755 "$KIND_WORK/bin/cni/$p" "$root/opt/cni/bin/$p"
  done
  chroot "$root" systemctl enable containerd.service kubelet.service >/dev/null 2>&1 \
    || die "[kind] systemctl enable in the base root failed"
  # Units that have no job in a node container (consoles, logins, timers of a real machine).
  chroot "$root" systemctl mask getty.target console-getty.service systemd-logind.service \
    systemd-firstboot.service apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer \
    fstrim.timer >/dev/null 2>&1 || die "[kind] systemctl mask in the base root failed"
  chroot "$root" systemctl set-default multi-user.target >/dev/null 2>&1
  # Every node generates its own machine id at first boot.
  : >"$root/etc/machine-id"
  rm -f "$root/var/lib/dbus/machine-id"
  rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/log/*.log
  KIND_TIMINGS+=$'\n'"rootfs $((SECONDS - t0))"
}

kind_docker_ok() {
  docker version --format '{{.Server.Version}}' >/dev/null 2>&1 \
    || die "[kind] no Docker engine answers (DOCKER_HOST=${DOCKER_HOST:-unset}); start ours: eval \"\$(python3 -m orchestrator.localplane.dockerd up)\""
}

# kind_image_from_files TAG DIR CHANGES...: an image whose only layer is DIR.
kind_image_from_files() {
  local tag=$1 dir=$2; shift 2
  local -a changes=()
  local c
  for c in "$@"; do changes+=(--change "$c"); done
  tar -C "$dir" --numeric-owner --owner=0 --group=0 -c . \
    | docker import "${changes[@]}" - "$tag" >/dev/null || die "[kind] docker import $tag failed"
}

# kind_image_on_base TAG BINARY NAME: the base image plus one binary in /usr/local/bin (kube-proxy
# and kube-router need iptables, ipset and a shell, which the base image has).
kind_image_on_base() {
  local tag=$1 bin=$2 name=$3 cid
  # The container's entrypoint and stop signal survive the commit (a --change 'ENTRYPOINT []'
  # does not clear them); the base's stop signal is systemd's (SIGRTMIN+3), these run a Go
  # binary as PID 1 instead. Pod specs that give only args (kube-router) need the entrypoint.
  cid=$(docker create --stop-signal SIGTERM --entrypoint "/usr/local/bin/$name" "$KIND_BASE_TAG") \
    || die "[kind] docker create failed"
  docker cp "$bin" "$cid:/usr/local/bin/$name" >/dev/null || die "[kind] docker cp $name failed"
  docker commit \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    "$cid" "$tag" >/dev/null || die "[kind] docker commit $tag failed"
  docker rm "$cid" >/dev/null
}

kind_single_binary_image() {
  local tag=$1 bin=$2 name=$3 entry=$4 d
  d=$(mktemp -d "$KIND_WORK/img.XXXXXX")
  mkdir -p "$d/usr/local/bin" "$d/etc" "$d/tmp"
  chmod 1777 "$d/tmp"
  install -m 0755 "$bin" "$d/usr/local/bin/$name"
  printf 'root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/:/sbin/nologin\n' >"$d/etc/passwd"
  printf 'root:x:0:\nnogroup:x:65534:\n' >"$d/etc/group"
  cp /etc/ssl/certs/ca-certificates.crt "$d/etc/ca-certificates.crt" 2>/dev/null || true
  if [[ $entry == yes ]]; then
    kind_image_from_files "$tag" "$d" 'ENV PATH=/usr/local/bin' "ENTRYPOINT [\"/usr/local/bin/$name\"]"
  else
    kind_image_from_files "$tag" "$d" 'ENV PATH=/usr/local/bin' "CMD [\"/usr/local/bin/$name\"]"
  fi
  rm -rf "$d"
}

kind_build_images() {
  local out=$1 t0=$SECONDS v cid tags tag
  kind_docker_ok
  KIND_BASE_TAG=fleet-calibrator/kind-base:$KIND_KEY
  log "[kind] base image $KIND_BASE_TAG ..."
  tar -C "$KIND_WORK/rootfs" --numeric-owner -c . | docker import --change 'ENV container=docker' \
    - "$KIND_BASE_TAG-rootfs" >/dev/null || die "[kind] docker import of the base root failed"
  # docker import and commit take no STOPSIGNAL; a container's stop signal survives a commit.
  # systemd as PID 1 shuts down on SIGRTMIN+3 (SIGTERM would make it re-execute itself).
  cid=$(docker create --stop-signal SIGRTMIN+3 --entrypoint /bin/true "$KIND_BASE_TAG-rootfs") \
    || die "[kind] docker create on the base root failed"
  docker commit --change 'ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]' --change 'CMD []' \
    "$cid" "$KIND_BASE_TAG" >/dev/null || die "[kind] docker commit $KIND_BASE_TAG failed"
  docker rm "$cid" >/dev/null
  docker rmi "$KIND_BASE_TAG-rootfs" >/dev/null
  docker save -o "$out/images/kind-base.tar" "$KIND_BASE_TAG" || die "[kind] docker save base failed"
  KIND_TIMINGS+=$'\n'"image-base $((SECONDS - t0))"

  # Component images shared by the node images (etcd, CoreDNS, pause, kube-router).
  t0=$SECONDS
  local pause_tag=registry.k8s.io/pause:$KIND_PAUSE_VERSION
  local router_tag=docker.io/cloudnativelabs/kube-router:$KIND_KUBE_ROUTER_VERSION
  for v in "${KIND_ETCD_VERSIONS[@]}"; do
    kind_single_binary_image "registry.k8s.io/etcd:$v-0" "$KIND_WORK/bin/etcd-$v" etcd no
  done
  for v in "${KIND_COREDNS_VERSIONS[@]}"; do
    kind_single_binary_image "registry.k8s.io/coredns/coredns:$v" "$KIND_WORK/bin/coredns-$v" coredns yes
  done
  kind_single_binary_image "$pause_tag" "$KIND_WORK/bin/pause" pause yes
  kind_image_on_base "$router_tag" "$KIND_WORK/bin/kube-router" kube-router
  KIND_TIMINGS+=$'\n'"images-shared $((SECONDS - t0))"

  for v in "${KIND_NODE_VERSIONS[@]}"; do
    t0=$SECONDS
    log "[kind] node image kindest/node:$v ..."
    local etcd_tag=registry.k8s.io/etcd:${KIND_ETCD_FOR[${v%.*}]}-0
    local dns_tag=registry.k8s.io/coredns/coredns:${KIND_COREDNS_FOR[${v%.*}]}
    local b
    for b in kube-apiserver kube-controller-manager kube-scheduler; do
      kind_single_binary_image "registry.k8s.io/$b:$v" "$KIND_WORK/bin/$v/$b" "$b" no
    done
    kind_image_on_base "registry.k8s.io/kube-proxy:$v" "$KIND_WORK/bin/$v/kube-proxy" kube-proxy
    tags=("registry.k8s.io/kube-apiserver:$v" "registry.k8s.io/kube-controller-manager:$v"
          "registry.k8s.io/kube-scheduler:$v" "registry.k8s.io/kube-proxy:$v"
          "$etcd_tag" "$dns_tag" "$pause_tag" "$router_tag")
    cid=$(docker run -d --privileged --tmpfs /run --tmpfs /tmp --entrypoint /bin/sleep \
      "$KIND_BASE_TAG" infinity) || die "[kind] cannot start the node build container"
    KIND_BUILD_CONTAINERS+=("$cid")
    for b in kubeadm kubelet kubectl; do
      docker cp "$KIND_WORK/bin/$v/$b" "$cid:/usr/bin/$b" >/dev/null || die "[kind] docker cp $b failed"
    done
    docker exec "$cid" sh -c "echo $v >/kind/version && sed -i 's#^  sandbox_image = .*#  sandbox_image = \"$pause_tag\"#' /etc/containerd/config.toml" \
      || die "[kind] node image setup failed"
    docker exec -d "$cid" containerd
    local i
    for i in $(seq 1 60); do
      docker exec "$cid" ctr version >/dev/null 2>&1 && break
      sleep 1
    done
    docker exec "$cid" ctr version >/dev/null 2>&1 || die "[kind] containerd did not start in the build container"
    for tag in "${tags[@]}"; do
      # --no-unpack: the build container's root is overlayfs, on which containerd's overlay
      # snapshotter cannot mount; the CRI plugin unpacks on first use, in the node's /var volume.
      docker save "$tag" | docker exec -i "$cid" ctr -n k8s.io images import --all-platforms \
        --no-unpack --digests - >/dev/null || die "[kind] importing $tag into the node failed"
    done
    local listed
    listed=$(docker exec "$cid" ctr -n k8s.io images ls -q)
    for tag in "${tags[@]}"; do
      grep -qxF "$tag" <<<"$listed" || die "[kind] $tag missing from the node's containerd after import"
    done
    docker exec "$cid" sh -c 'kill $(pidof containerd); for i in $(seq 1 30); do pidof containerd >/dev/null || exit 0; sleep 1; done; exit 1' \
      || die "[kind] containerd did not stop in the build container"
    docker commit \
      --change 'ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]' --change 'CMD []' \
      "$cid" "kindest/node:$v" >/dev/null || die "[kind] docker commit kindest/node:$v failed"
    docker rm -f "$cid" >/dev/null
    docker save -o "$out/images/node-$v.tar" "kindest/node:$v" || die "[kind] docker save node failed"
    KIND_TIMINGS+=$'\n'"image-node-$v $((SECONDS - t0))"
  done
}

kind_write_manifest() {
  local dir=$1 final=$2 v sep
  {
    printf '{\n  "schema": 1,\n  "set": "kind",\n'
    printf '  "cacheKey": %s,\n  "dir": %s,\n' "$(kind_json "$KIND_KEY")" "$(kind_json "$final")"
    printf '  "kind": %s,\n' "$(kind_json "$KIND_VERSION")"
    printf '  "binaries": {"kind": %s, "kubectl": %s},\n' \
      "$(kind_json "$final/bin/kind")" "$(kind_json "$final/bin/kubectl")"
    printf '  "baseImage": {"tag": %s, "archive": %s},\n' \
      "$(kind_json "fleet-calibrator/kind-base:$KIND_KEY")" "$(kind_json "$final/images/kind-base.tar")"
    printf '  "nodeImages": {'
    sep=
    for v in "${KIND_NODE_VERSIONS[@]}"; do
      printf '%s\n    %s: {"tag": %s, "archive": %s, "etcd": %s, "coredns": %s}' "$sep" "$(kind_json "$v")" \
        "$(kind_json "kindest/node:$v")" "$(kind_json "$final/images/node-$v.tar")" \
        "$(kind_json "${KIND_ETCD_FOR[${v%.*}]}")" "$(kind_json "${KIND_COREDNS_FOR[${v%.*}]}")"
      sep=,
    done
    printf '\n  },\n'
    printf '  "components": {"pause": %s, "cniPlugins": %s, "crictl": %s, "kubeRouter": %s},\n' \
      "$(kind_json "$KIND_PAUSE_VERSION")" "$(kind_json "$KIND_CNI_PLUGINS_VERSION")" \
      "$(kind_json "$KIND_CRICTL_VERSION")" "$(kind_json "$KIND_KUBE_ROUTER_VERSION")"
    printf '  "debian": %s,\n  "go": %s,\n  "platform": %s\n}\n' \
      "$(kind_json "$KIND_DEBIAN_SUITE")" "$(kind_json "$GO_VERSION")" "$(kind_json "$GO_PLATFORM")"
  } >"$dir/manifest.json.tmp"
  mv -f "$dir/manifest.json.tmp" "$dir/manifest.json"
}

kind_cleanup() {
  local c
  for c in "${KIND_BUILD_CONTAINERS[@]}"; do docker rm -f "$c" >/dev/null 2>&1 || true; done
  # An if, not `[[ ]] && ...`: the EXIT trap's status becomes the script's, and a published build
  # has KIND_OUT empty (a false `[[ ]]` made every successful build exit 1).
  if [[ -n ${KIND_OUT:-} ]]; then rm -rf "$KIND_OUT"; fi
}

kind_set_main() {
  KIND_KEY=$(kind_cache_key)
  local dir=$CACHE_ROOT/kind-$KIND_KEY
  if [[ $MODE == print-dir ]]; then printf '%s\n' "$dir"; exit 0; fi
  if [[ $FORCE == 0 ]] && kind_complete_dir "$dir"; then
    log "cached: $dir"; printf '%s\n' "$dir"; exit 0
  fi
  cached_only_exit "$dir"
  [[ $(id -u) == 0 ]] || die "[kind] needs root (debootstrap, chroot)"
  local t
  for t in debootstrap gcc docker; do
    command -v "$t" >/dev/null || die "[kind] $t not found (apt-get install debootstrap gcc docker.io)"
  done
  mkdir -p "$CACHE_ROOT"
  exec 9>"$CACHE_ROOT/.lock-kind-$KIND_KEY"
  if ! flock -n 9; then log "another build of kind-$KIND_KEY is running; waiting for it"; flock 9; fi
  if [[ $FORCE == 0 ]] && kind_complete_dir "$dir"; then
    log "cached: $dir"; printf '%s\n' "$dir"; exit 0
  fi
  local v
  kind_check_pin kind/kind sigs.k8s.io/kind "$KIND_VERSION"
  for v in "${KIND_ETCD_VERSIONS[@]}"; do
    kind_check_pin "kind/etcd-v$v" go.etcd.io/etcd/server/v3 "v$v"
    kind_check_pin "kind/etcd-v$v" go.etcd.io/etcd/api/v3 "v$v"
  done
  for v in "${KIND_COREDNS_VERSIONS[@]}"; do
    kind_check_pin "kind/coredns-$v" github.com/coredns/coredns "$v"
  done
  kind_check_pin kind/nodetools github.com/containernetworking/plugins "$KIND_CNI_PLUGINS_VERSION"
  kind_check_pin kind/nodetools sigs.k8s.io/cri-tools "$KIND_CRICTL_VERSION"
  kind_check_pin kind/kube-router github.com/cloudnativelabs/kube-router/v2 "$KIND_KUBE_ROUTER_VERSION"
  for v in "${KIND_NODE_VERSIONS[@]}"; do
    kind_check_pin "kind/k8s-${v%.*}" k8s.io/kubernetes "$v"
  done

  # The work dir keeps the debootstrapped root and the binaries between attempts of one key.
  KIND_WORK=$CACHE_ROOT/.work-kind-$KIND_KEY
  mkdir -p "$KIND_WORK/bin"
  KIND_OUT=$(mktemp -d "$CACHE_ROOT/.tmp-kind-$KIND_KEY.XXXXXX")
  KIND_BUILD_CONTAINERS=()
  trap kind_cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  KIND_TIMINGS=
  local t_all=$SECONDS t0=$SECONDS m
  log "[kind] building kind-$KIND_KEY (go $GO_VERSION, $GO_PLATFORM): kind $KIND_VERSION, nodes ${KIND_NODE_VERSIONS[*]}"
  for m in "${KIND_MODULES[@]}"; do kind_go "$m" mod download >&2; done
  KIND_TIMINGS="download $((SECONDS - t0))"
  kind_build_binaries
  kind_rootfs
  mkdir -p "$KIND_OUT/bin" "$KIND_OUT/images"
  kind_build_images "$KIND_OUT"
  install -m 0755 "$KIND_WORK/bin/kind" "$KIND_OUT/bin/kind"
  install -m 0755 "$KIND_WORK/bin/${KIND_NODE_VERSIONS[0]}/kubectl" "$KIND_OUT/bin/kubectl"
  KIND_TIMINGS+=$'\n'"total $((SECONDS - t_all))"
  printf '%s\n' "${KIND_TIMINGS#$'\n'}" >"$KIND_OUT/build-seconds.txt"
  kind_write_manifest "$KIND_OUT" "$dir"
  if [[ -e $dir ]]; then rm -rf "$dir"; fi
  chmod 755 "$KIND_OUT"
  mv -T "$KIND_OUT" "$dir"
  KIND_OUT=
  rm -rf "$KIND_WORK"
  log "[kind] done in $((SECONDS - t_all))s: $dir"
  printf '%s\n' "$dir"
}
