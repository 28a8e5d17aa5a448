# The "capi-images" set of ../build.sh (tools/build.sh --set capi-images): what a kind management
# cluster needs to run Cluster API as pods, the way users install it with `clusterctl init`:
#   bin/clusterctl, bin/kustomize, bin/helm      from pinned Go modules (wrappers tools/capi-images/*)
#   images/<name>.tar                             one-layer `docker save` archives of the four CAPI
#                                                 managers (binaries of the control-plane set) and of
#                                                 cert-manager's controller, webhook and cainjector
#   repository/                                   a clusterctl local repository: components rendered
#                                                 with kustomize from each pinned module's config/,
#                                                 cert-manager rendered with helm from its chart
#   clusterctl.yaml                               providers (file:// URLs), cert-manager, images:
#   manifest.json, build-seconds.txt
# Sourced by ../build.sh after its argument parsing; uses its pins (CLUSTER_API_VERSION,
# CAPI_IMAGES_*), helpers (log, die) and variables (TOOLS_DIR, CACHE_ROOT, NICE, MODE, FORCE,
# GO_VERSION, GO_PLATFORM). Needs the control-plane set built (tools/build.sh) but no Docker
# engine and no root: the image archives are assembled here, like the haproxy set's.
# See ../README.md, "The capi-images set", and docs/kind.md, section 6.

CAPI_IMAGES_MODULES=(capi-images/clusterctl capi-images/kustomize capi-images/helm capi-images/cert-manager)
# Upstream's image names (what a release's components name); clusterctl's `images:` override in
# our clusterctl.yaml rewrites the repository to CAPI_IMAGES_REPOSITORY, under which the archives
# are tagged, as a user pointing clusterctl at a private registry would.
CAPI_UPSTREAM_REPOSITORY=registry.k8s.io/cluster-api
CERT_MANAGER_UPSTREAM_REPOSITORY=quay.io/jetstack
# manager image name -> control-plane set binary
declare -A CAPI_IMAGE_BINARY=(
  [cluster-api-controller]=capi-manager
  [kubeadm-bootstrap-controller]=kubeadm-bootstrap-manager
  [kubeadm-control-plane-controller]=kubeadm-control-plane-manager
  [capd-manager]=capd-manager
)
CERT_MANAGER_COMPONENTS=(controller webhook cainjector)

capi_images_go() { local mod=$1; shift; (cd "$TOOLS_DIR/$mod" && nice -n "$NICE" go "$@"); }

capi_images_cache_key() {
  {
    printf 'set=capi-images\nclusterAPI=%s\nkustomize=%s\nhelm=%s\ncertManager=%s\nrepository=%s\n' \
      "$CLUSTER_API_VERSION" "$CAPI_IMAGES_KUSTOMIZE_VERSION" "$CAPI_IMAGES_HELM_VERSION" \
      "$CAPI_IMAGES_CERT_MANAGER_VERSION" "$CAPI_IMAGES_REPOSITORY"
    printf 'recipe=%s\ngo=%s\nplatform=%s\ncgo=%s\ncontrolPlaneSet=%s\n' \
      "$CAPI_IMAGES_RECIPE_REVISION" "$GO_VERSION" "$GO_PLATFORM" "$CGO_ENABLED" \
      "$(basename "$CAPI_IMAGES_CP_DIR")"
    local m f
    for m in "${CAPI_IMAGES_MODULES[@]}"; do
      for f in go.mod go.sum tools.go; do
        printf '== %s/%s\n' "$m" "$f"
        cat "$TOOLS_DIR/$m/$f"
      done
    done
  } | sha256sum | cut -c1-16
}

capi_images_complete_dir() {
  local d=$1 i
  [[ -f $d/manifest.json && -f $d/clusterctl.yaml && -x $d/bin/clusterctl && -x $d/bin/kustomize && -x $d/bin/helm && -d $d/repository ]] || return 1
  for i in "${!CAPI_IMAGE_BINARY[@]}"; do [[ -f $d/images/$i.tar ]] || return 1; done
  for i in "${CERT_MANAGER_COMPONENTS[@]}"; do [[ -f $d/images/cert-manager-$i.tar ]] || return 1; done
}

capi_images_check_pin() {
  local mod=$1 path=$2 want=$3 got
  got=$(cd "$TOOLS_DIR/$mod" && go list -m -f '{{.Version}}' "$path")
  [[ $got == "$want" ]] || die "tools/$mod selects $path $got but build.sh pins $want"
}

capi_images_release_date() {
  (cd "$TOOLS_DIR/$1" && go list -m -f '{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}' "$2")
}

capi_images_moddir() {
  (cd "$TOOLS_DIR/$1" && go list -m -f '{{.Dir}}' "$2")
}

# capi_images_build NAME MODULE PACKAGE LDFLAGS: one static binary into $CAPI_WORK/bin, timed.
capi_images_build() {
  local name=$1 mod=$2 pkg=$3 flags=$4 t0=$SECONDS
  log "[capi-images] go build $pkg -> $name (tools/$mod) ..."
  capi_images_go "$mod" build -mod=readonly -trimpath -ldflags "-s -w $flags" -o "$CAPI_WORK/bin/$name" "$pkg" \
    || die "[capi-images] go build $pkg failed after $((SECONDS - t0))s"
  log "[capi-images] $name built in $((SECONDS - t0))s ($(du -h "$CAPI_WORK/bin/$name" | cut -f1))"
  CAPI_TIMINGS+=$'\n'"$name $((SECONDS - t0))"
}

# capi_images_archive ROOT TAG USER ENTRYPOINT OUT: a one-layer `docker save` archive of ROOT.
# Like upstream's distroless "static" images: the binary, CA certificates, passwd/group with
# root and nonroot (65532), /tmp, and no shell. Fixed mtimes, so the same inputs give the same ID.
capi_images_archive() {
  local root=$1 tag=$2 user=$3 entrypoint=$4 out=$5
  one_layer_image "$root" "$tag" "$out" capi-images "$(printf '{"User":"%s","Env":["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin","SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"],"Entrypoint":["%s"],"WorkingDir":"/"}' "$user" "$entrypoint")"
}

# capi_images_rootfs DIR BINARY PATH_IN_IMAGE: the distroless-like root with one binary.
capi_images_rootfs() {
  local root=$1 bin=$2 path=$3
  mkdir -p "$root/etc/ssl/certs" "$root/tmp" "$root/home/nonroot" "$root$(dirname "$path")"
  chmod 1777 "$root/tmp"
  chown 65532:65532 "$root/home/nonroot"
  [[ -f /etc/ssl/certs/ca-certificates.crt ]] || die "[capi-images] no /etc/ssl/certs/ca-certificates.crt (apt-get install ca-certificates)"
  cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
  printf 'root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$root/etc/passwd"
  printf 'root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n' >"$root/etc/group"
  install -m 0755 "$bin" "$root$path"
}

capi_images_build_images() {
  local name root t0=$SECONDS c user
  mkdir -p "$CAPI_WORK/images"
  for name in "${!CAPI_IMAGE_BINARY[@]}"; do
    root=$CAPI_WORK/rootfs-$name
    capi_images_rootfs "$root" "$CAPI_IMAGES_CP_DIR/${CAPI_IMAGE_BINARY[$name]}" /manager
    # Upstream's manager images run as 65532 (nonroot); CAPD talks to the engine's socket, which
    # our dockerd creates root-owned (0660), so CAPD's image runs as root instead.
    user=65532:65532
    [[ $name == capd-manager ]] && user=0:0
    capi_images_archive "$root" "$CAPI_IMAGES_REPOSITORY/$name:$CLUSTER_API_VERSION" "$user" /manager \
      "$CAPI_WORK/images/$name.tar"
    rm -rf "$root"
  done
  for c in "${CERT_MANAGER_COMPONENTS[@]}"; do
    root=$CAPI_WORK/rootfs-cert-manager-$c
    capi_images_rootfs "$root" "$CAPI_WORK/bin/cert-manager-$c" "/app/cmd/$c/$c"
    capi_images_archive "$root" "$CAPI_IMAGES_REPOSITORY/cert-manager-$c:$CAPI_IMAGES_CERT_MANAGER_VERSION" \
      1000:1000 "/app/cmd/$c/$c" "$CAPI_WORK/images/cert-manager-$c.tar"
    rm -rf "$root"
  done
  # The cert-manager binaries live in their images; the host does not need them.
  rm -f "$CAPI_WORK"/bin/cert-manager-*
  log "[capi-images] images written in $((SECONDS - t0))s"
  CAPI_TIMINGS+=$'\n'"images $((SECONDS - t0))"
}

# capi_images_render_provider LABEL FILE CONFIG_DIR IMAGE_NAME STAGING_IMAGE: kustomize build of
# CONFIG_DIR (a module's config/default) through an overlay that does what upstream's release
# target does to it (image name and tag, imagePullPolicy IfNotPresent).
capi_images_render_provider() {
  local label=$1 file=$2 config=$3 image=$4 staging=$5 overlay out
  [[ -f $config/kustomization.yaml ]] || die "[capi-images] no kustomization in $config"
  overlay=$CAPI_WORK/overlay-$label
  out=$CAPI_WORK/repository/$label/$CLUSTER_API_VERSION
  mkdir -p "$overlay" "$out"
  # kustomize refuses absolute resource paths; a relative one may leave the overlay's root.
  cat >"$overlay/kustomization.yaml" <<EOF
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- $(realpath --relative-to="$overlay" "$config")
images:
- name: $staging
  newName: $CAPI_UPSTREAM_REPOSITORY/$image
  newTag: $CLUSTER_API_VERSION
patches:
- target:
    kind: Deployment
  patch: |-
    - op: replace
      path: /spec/template/spec/containers/0/imagePullPolicy
      value: IfNotPresent
EOF
  "$CAPI_WORK/bin/kustomize" build "$overlay" >"$out/$file" \
    || die "[capi-images] kustomize build of $config failed"
  grep -q "image: $CAPI_UPSTREAM_REPOSITORY/$image:$CLUSTER_API_VERSION" "$out/$file" \
    || die "[capi-images] $label: rendered components do not name $image"
  # One metadata.yaml per release for every provider of the repository (CAPD's module has none
  # of its own; upstream's local-repository script gives CAPD the core one too).
  install -m 0644 "$CAPI_CORE_DIR/metadata.yaml" "$out/metadata.yaml"
  rm -rf "$overlay"
}

# cert-manager's static manifest, made the way its release does (make/manifests.mk): the chart
# with Chart.yaml's versions set and the CRDs added as templates/crds.yaml, rendered with
# `helm template` (installCRDs, no startupapicheck), after the namespace.
capi_images_render_cert_manager() {
  local src chart out v=$CAPI_IMAGES_CERT_MANAGER_VERSION f
  src=$(capi_images_moddir capi-images/cert-manager github.com/cert-manager/cert-manager)
  chart=$CAPI_WORK/chart/cert-manager
  out=$CAPI_WORK/repository/cert-manager/$v
  mkdir -p "$chart" "$out"
  cp -r "$src/deploy/charts/cert-manager/templates" "$src/deploy/charts/cert-manager/values.yaml" "$chart/"
  chmod -R u+w "$chart"
  sed -e "s/^version: .*/version: $v/; s/^appVersion: .*/appVersion: $v/; s/{{IS_PRERELEASE}}/false/" \
    "$src/deploy/charts/cert-manager/Chart.template.yaml" >"$chart/Chart.yaml"
  {
    echo '{{- if .Values.installCRDs }}'
    for f in "$src"/deploy/crds/crd-*.yaml; do echo '---'; cat "$f"; done
    echo '{{- end }}'
  } >"$chart/templates/crds.yaml"
  {
    cat "$src/deploy/manifests/namespace.yaml"
    # helm assumes Kubernetes v1.20 unless told (its release stamps a version at link time);
    # the chart wants >= 1.21, and the management cluster runs KUBERNETES_VERSION.
    "$CAPI_WORK/bin/helm" template --kube-version="$KUBERNETES_VERSION" --namespace=cert-manager --set=installCRDs=true \
      --set=creator=static --set=startupapicheck.enabled=false cert-manager "$chart" \
      || die "[capi-images] helm template of cert-manager's chart failed"
  } >"$out/cert-manager.yaml"
  grep -q "image: \"$CERT_MANAGER_UPSTREAM_REPOSITORY/cert-manager-controller:$v\"" "$out/cert-manager.yaml" \
    || die "[capi-images] cert-manager.yaml does not name cert-manager-controller:$v"
  rm -rf "$CAPI_WORK/chart"
}

capi_images_render() {
  local t0=$SECONDS test_dir
  test_dir=$(capi_images_moddir capi-images/clusterctl sigs.k8s.io/cluster-api)
  [[ $test_dir == "$CAPI_CORE_DIR" ]] || die "[capi-images] tools/capi-images/clusterctl and tools/capi disagree on cluster-api's module dir"
  capi_images_render_provider cluster-api core-components.yaml "$CAPI_CORE_DIR/config/default" \
    cluster-api-controller gcr.io/k8s-staging-cluster-api/cluster-api-controller
  capi_images_render_provider bootstrap-kubeadm bootstrap-components.yaml "$CAPI_CORE_DIR/bootstrap/kubeadm/config/default" \
    kubeadm-bootstrap-controller gcr.io/k8s-staging-cluster-api/kubeadm-bootstrap-controller
  capi_images_render_provider control-plane-kubeadm control-plane-components.yaml "$CAPI_CORE_DIR/controlplane/kubeadm/config/default" \
    kubeadm-control-plane-controller gcr.io/k8s-staging-cluster-api/kubeadm-control-plane-controller
  capi_images_render_provider infrastructure-docker infrastructure-components.yaml "$CAPI_TEST_DIR/infrastructure/docker/config/default" \
    capd-manager gcr.io/k8s-staging-cluster-api/capd-manager
  capi_images_render_cert_manager
  log "[capi-images] repository rendered in $((SECONDS - t0))s"
  CAPI_TIMINGS+=$'\n'"render $((SECONDS - t0))"
}

# clusterctl's configuration: the local repository's providers (file:// URLs into the final
# cache dir), our cert-manager, the image override and the variables the templates need.
capi_images_write_config() {
  local dir=$1 v=$CLUSTER_API_VERSION r=$1/repository
  cat >"$CAPI_WORK/clusterctl.yaml" <<EOF
# Written by tools/build.sh --set capi-images; use with clusterctl --config THIS_FILE.
providers:
- name: cluster-api
  type: CoreProvider
  url: file://$r/cluster-api/$v/core-components.yaml
- name: kubeadm
  type: BootstrapProvider
  url: file://$r/bootstrap-kubeadm/$v/bootstrap-components.yaml
- name: kubeadm
  type: ControlPlaneProvider
  url: file://$r/control-plane-kubeadm/$v/control-plane-components.yaml
- name: docker
  type: InfrastructureProvider
  url: file://$r/infrastructure-docker/$v/infrastructure-components.yaml
cert-manager:
  url: file://$r/cert-manager/$CAPI_IMAGES_CERT_MANAGER_VERSION/cert-manager.yaml
  version: $CAPI_IMAGES_CERT_MANAGER_VERSION
images:
  all:
    repository: $CAPI_IMAGES_REPOSITORY
  cert-manager:
    repository: $CAPI_IMAGES_REPOSITORY
# ClusterClass (capi-templates/docker) needs the ClusterTopology feature gate.
CLUSTER_TOPOLOGY: "true"
EOF
}

capi_images_set_main() {
  local key dir
  CAPI_IMAGES_CP_DIR=$("$TOOLS_DIR/build.sh" --print-dir) || die "[capi-images] tools/build.sh --print-dir failed"
  key=$(capi_images_cache_key)
  dir=$CACHE_ROOT/capi-images-$key
  if [[ $MODE == print-dir ]]; then printf '%s\n' "$dir"; exit 0; fi
  if [[ $FORCE == 0 ]] && capi_images_complete_dir "$dir"; then
    log "cached: $dir"; printf '%s\n' "$dir"; exit 0
  fi
  cached_only_exit "$dir"
  [[ -f $CAPI_IMAGES_CP_DIR/manifest.json ]] \
    || die "[capi-images] the control-plane set is not built: run tools/build.sh first ($CAPI_IMAGES_CP_DIR)"
  [[ $(id -u) == 0 ]] || die "[capi-images] needs root (image files owned by 65532)"
  mkdir -p "$CACHE_ROOT"
  exec 9>"$CACHE_ROOT/.lock-capi-images-$key"
  if ! flock -n 9; then log "another build of capi-images-$key is running; waiting for it"; flock 9; fi
  if [[ $FORCE == 0 ]] && capi_images_complete_dir "$dir"; then
    log "cached: $dir"; printf '%s\n' "$dir"; exit 0
  fi
  CAPI_WORK=$(mktemp -d "$CACHE_ROOT/.tmp-capi-images-$key.XXXXXX")
  trap 'rm -rf "$CAPI_WORK"' EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  local t_all=$SECONDS t0=$SECONDS m capi_date k major minor
  capi_images_check_pin capi-images/clusterctl sigs.k8s.io/cluster-api "$CLUSTER_API_VERSION"
  capi_images_check_pin capi-images/kustomize sigs.k8s.io/kustomize/kustomize/v5 "$CAPI_IMAGES_KUSTOMIZE_VERSION"
  capi_images_check_pin capi-images/helm helm.sh/helm/v3 "$CAPI_IMAGES_HELM_VERSION"
  capi_images_check_pin capi-images/cert-manager github.com/cert-manager/cert-manager "$CAPI_IMAGES_CERT_MANAGER_VERSION"
  for m in "${CAPI_IMAGES_MODULES[@]}"; do
    log "[capi-images] downloading modules of tools/$m"
    capi_images_go "$m" mod download >&2 || die "[capi-images] go mod download in tools/$m failed"
  done
  CAPI_TIMINGS="download $((SECONDS - t0))"
  CAPI_CORE_DIR=$(capi_images_moddir capi-images/clusterctl sigs.k8s.io/cluster-api)
  CAPI_TEST_DIR=$(cd "$TOOLS_DIR/capi" && go list -m -f '{{.Dir}}' sigs.k8s.io/cluster-api/test)
  mkdir -p "$CAPI_WORK/bin"
  capi_date=$(capi_images_release_date capi-images/clusterctl sigs.k8s.io/cluster-api)
  major=${CLUSTER_API_VERSION#v}; major=${major%%.*}
  minor=${CLUSTER_API_VERSION#v*.}; minor=${minor%%.*}
  k=sigs.k8s.io/cluster-api/version
  capi_images_build clusterctl capi-images/clusterctl sigs.k8s.io/cluster-api/cmd/clusterctl \
    "-X $k.gitVersion=$CLUSTER_API_VERSION -X $k.gitMajor=$major -X $k.gitMinor=$minor -X $k.gitTreeState=clean -X $k.buildDate=$capi_date"
  capi_images_build kustomize capi-images/kustomize sigs.k8s.io/kustomize/kustomize/v5 \
    "-X sigs.k8s.io/kustomize/api/provenance.version=kustomize/$CAPI_IMAGES_KUSTOMIZE_VERSION"
  capi_images_build helm capi-images/helm helm.sh/helm/v3/cmd/helm \
    "-X helm.sh/helm/v3/internal/version.version=$CAPI_IMAGES_HELM_VERSION"
  for m in "${CERT_MANAGER_COMPONENTS[@]}"; do
    capi_images_build "cert-manager-$m" capi-images/cert-manager "github.com/cert-manager/cert-manager/cmd/$m" \
      "-X github.com/cert-manager/cert-manager/pkg/util.AppVersion=$CAPI_IMAGES_CERT_MANAGER_VERSION -X github.com/cert-manager/cert-manager/pkg/util.AppGitCommit=module-$CAPI_IMAGES_CERT_MANAGER_VERSION -X github.com/cert-manager/cert-manager/pkg/util.AppGitState=clean"
  done
  capi_images_render
  capi_images_build_images
  capi_images_write_config "$dir"
  CAPI_TIMINGS+=$'\n'"total $((SECONDS - t_all))"
  printf '%s\n' "$CAPI_TIMINGS" >"$CAPI_WORK/build-seconds.txt"
  {
    printf '{\n  "key": "%s",\n  "clusterAPI": "%s",\n  "kustomize": "%s",\n  "helm": "%s",\n' \
      "$key" "$CLUSTER_API_VERSION" "$CAPI_IMAGES_KUSTOMIZE_VERSION" "$CAPI_IMAGES_HELM_VERSION"
    printf '  "certManager": "%s",\n  "controlPlaneSet": "%s",\n  "images": {\n' \
      "$CAPI_IMAGES_CERT_MANAGER_VERSION" "$CAPI_IMAGES_CP_DIR"
    local first=1 n
    for n in "${!CAPI_IMAGE_BINARY[@]}"; do
      ((first)) || printf ',\n'; first=0
      printf '    "%s": "%s/%s:%s"' "$n" "$CAPI_IMAGES_REPOSITORY" "$n" "$CLUSTER_API_VERSION"
    done
    for n in "${CERT_MANAGER_COMPONENTS[@]}"; do
      printf ',\n    "cert-manager-%s": "%s/cert-manager-%s:%s"' "$n" "$CAPI_IMAGES_REPOSITORY" "$n" "$CAPI_IMAGES_CERT_MANAGER_VERSION"
    done
    printf '\n  },\n  "clusterctlConfig": "%s/clusterctl.yaml"\n}\n' "$dir"
  } >"$CAPI_WORK/manifest.json"
  if [[ -e $dir ]]; then rm -rf "$dir"; fi
  chmod 755 "$CAPI_WORK"
  mv -T "$CAPI_WORK" "$dir"
  CAPI_WORK=
  log "[capi-images] done in $((SECONDS - t_all))s: $dir"
  printf '%s\n' "$dir"
}
